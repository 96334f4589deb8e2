"""pandas is optional: only the DataFrame methods need it."""


def pandas():
    try:
        import pandas
    except ImportError as e:
        raise ImportError("this needs pandas: apt install python3-pandas "
                          "(or pip install pandas)") from e
    return pandas


def frame(rows, columns, typed=()):
    """A DataFrame of `rows` (tuples in `columns` order). Columns named in `typed` ({column:
    'UInt64' or 'Int64'}) are built as nullable integer arrays from the values themselves:
    through a float column (pandas' guess for ints with None) 64-bit fingerprints lose bits."""
    pd = pandas()
    typed = dict(typed)
    data = {}
    for i, column in enumerate(columns):
        values = [row[i] for row in rows]
        data[column] = pd.array(values, dtype=typed[column]) if column in typed else values
    return pd.DataFrame(data, columns=columns)
