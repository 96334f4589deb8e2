"""Under Python, extension modules and their CUDA libraries are loaded RTLD_LOCAL: the case where
dlsym(RTLD_NEXT) from the preloaded shim finds nothing. Loads the fake "extension" with ctypes
(RTLD_LOCAL) and checks that the shim's hook ran once and the real stub ran once.

usage: python_extension_test.py <libfakeapp.so> <libfakecudart.so.13> <libfakecuda.so.1>
(run with LD_PRELOAD=liblockstep_testshim.so)"""
import ctypes
import sys


def main() -> int:
    app_path, cudart_path, cuda_path = sys.argv[1:4]
    shim = ctypes.CDLL(None)  # the global scope: the preloaded test shim's test API
    try:
        shim.lockstep_fake_log.restype = ctypes.c_void_p
    except AttributeError:
        print("FAIL: the test shim is not preloaded")
        return 1
    app = ctypes.CDLL(app_path, mode=ctypes.RTLD_LOCAL)
    cudart = ctypes.CDLL(cudart_path, mode=ctypes.RTLD_LOCAL)  # already loaded: same object
    cuda = ctypes.CDLL(cuda_path, mode=ctypes.RTLD_LOCAL)
    shim.lockstep_fake_clear()
    app.app_launch_stub.argtypes = [ctypes.c_bool]
    if app.app_launch_stub(False) != 0:
        print("FAIL: app_launch_stub returned an error")
        return 1
    raw = shim.lockstep_fake_log()
    log = ctypes.string_at(raw).decode()
    ctypes.CDLL(None).free(ctypes.c_void_p(raw))
    begins = [line for line in log.splitlines() if line.startswith("launch_begin")]
    runtime_calls = cudart.fakecudart_calls(b"__cudaLaunchKernel")
    driver_calls = cuda.fakecuda_calls(b"cuLaunchKernel")
    if len(begins) != 1 or "api=1 " not in begins[0]:
        print(f"FAIL: expected one runtime-stub launch event, log:\n{log}")
        return 1
    if runtime_calls != 1 or driver_calls != 1:
        print(f"FAIL: real stubs ran {runtime_calls} / {driver_calls} times, expected 1 / 1")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
