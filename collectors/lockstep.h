/* lockstep's C API: explicit steps, for jobs that want exact steps, and state fingerprints.
 * Exported by the shim (liblockstep.so); every function does nothing when the job runs without
 * it (resolve them with dlsym(RTLD_DEFAULT, ...)). From Python: the `lockstep` package
 * (lockstep.step(), lockstep.mark(), lockstep.fingerprint()). */
#ifndef LOCKSTEP_COLLECTORS_LOCKSTEP_H_
#define LOCKSTEP_COLLECTORS_LOCKSTEP_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The current step is finished; the next one starts. */
__attribute__((visibility("default"))) void lockstep_step(void);
/* Same, and the step that starts is the job's step `n` (its own number: the iteration its
 * loop is at, which a resumed job continues from). `lockstep diff` pairs two runs' steps by
 * these numbers, so that a run resumed from a checkpoint compares with a run that went straight
 * through. Markers named "step 12" / "iteration 12" carry a number the same way. */
__attribute__((visibility("default"))) void lockstep_step_number(unsigned long long n);
/* Same as lockstep_step, naming the boundary (the StepMarker record carries `name`; a name like
 * "step 12" numbers the step as lockstep_step_number(12) does). */
__attribute__((visibility("default"))) void lockstep_mark(const char* name);

/* `text` as an NVTX range or mark with that message: it ends the step only when it matches the
 * step pattern (LOCKSTEP_STEP_ON), and "step 12" / "step_num=12" numbers the step that starts.
 * For frameworks whose annotations are not NVTX (JAX's TraceAnnotation). */
__attribute__((visibility("default"))) void lockstep_marker(const char* text);

/* From now on a record's step follows the order of work on its own stream, not the host
 * thread that ran first (collectors/stream_steps.h): for jobs that launch from worker threads
 * while another thread marks steps, as XLA does. The `lockstep` package calls it for JAX. */
__attribute__((visibility("default"))) void lockstep_step_order_streams(void);

/* Fingerprints `bytes` bytes of device memory at `ptr` as the job's state named `name` (a
 * State record of the current step, at levels broad and full). The hash runs on `stream` (a
 * cudaStream_t / CUstream; 0 for the legacy default stream) after the work already queued
 * there: nothing synchronizes. `kind`: 0 parameter, 1 gradient, 2 optimizer state, 3 other. */
__attribute__((visibility("default"))) void lockstep_fingerprint(const void* ptr,
                                                                 unsigned long long bytes,
                                                                 const char* name, void* stream,
                                                                 int kind);
/* The same for n tensors in one hash launch (the parameters of a model after its optimizer
 * step): ptrs[i], bytes[i], names[i]. `kind` | LOCKSTEP_SAME_NAMES promises that `names` is the
 * very array of this thread's last lockstep_fingerprint_many call, its strings unchanged: they
 * are then not read again (77 cold strings cost a PyTorch step's state call microseconds; the
 * pointers and sizes are compared every call). A caller whose arrays live as long as its tensors
 * stay put may pass it (the PyTorch state hook's steady step); where names are written between
 * calls, a name would stay the last call's. */
#define LOCKSTEP_SAME_NAMES 0x100
__attribute__((visibility("default"))) void lockstep_fingerprint_many(
    unsigned long long n, const void* const* ptrs, const unsigned long long* bytes,
    const char* const* names, void* stream, int kind);

/* Nonzero once a stream capture (a CUDA graph being recorded) has begun anywhere in the process;
 * before that no stream can be capturing. Lets a per-step hook skip asking the runtime whether
 * its stream captures (the PyTorch state hook's steady step, python/src/state_hook.cpp). */
__attribute__((visibility("default"))) int lockstep_capture_begun(void);

/* A named range opens on the calling thread: every record the thread makes until the matching
 * lockstep_scope_pop carries it (inside the ranges already open), and `lockstep show`, `diff` and
 * `export` name it. The same as an NVTX range push/pop, for jobs without NVTX; `name` is copied.
 * The PyTorch hooks of `lockstep run` use these for module names ("blocks.1.mlp (forward)"). */
__attribute__((visibility("default"))) void lockstep_scope_push(const char* name);
/* Closes the innermost range lockstep_scope_push opened on the calling thread. */
__attribute__((visibility("default"))) void lockstep_scope_pop(void);

#ifdef __cplusplus
}
#endif

#endif /* LOCKSTEP_COLLECTORS_LOCKSTEP_H_ */
