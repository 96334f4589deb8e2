compiling = False  # a test sets it to stand for dynamo tracing a compiled region


def is_compiling():
    return compiling
