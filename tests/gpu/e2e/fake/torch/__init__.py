"""A stand-in for torch, enough for bench/hashing/run_bench.py without a GPU: dtype names, an
empty cache and no hash_tensor (run_bench.py then leaves torch's column empty)."""
__version__ = "0.0-fake"
float32, bfloat16, float8_e4m3fn = "float32", "bfloat16", "float8_e4m3fn"


class cuda:  # noqa: N801 - as torch.cuda
    @staticmethod
    def empty_cache():
        pass
