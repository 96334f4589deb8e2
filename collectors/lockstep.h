/* lockstep's explicit step API, for jobs that want exact steps. Exported by the shim
 * (liblockstep.so); from Python: lockstep.step() and lockstep.mark() (python/README.md). */
#ifndef LOCKSTEP_COLLECTORS_LOCKSTEP_H_
#define LOCKSTEP_COLLECTORS_LOCKSTEP_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The current step is finished; the next one starts. */
__attribute__((visibility("default"))) void lockstep_step(void);
/* Same, naming the boundary (the StepMarker record carries `name`). */
__attribute__((visibility("default"))) void lockstep_mark(const char* name);

#ifdef __cplusplus
}
#endif

#endif /* LOCKSTEP_COLLECTORS_LOCKSTEP_H_ */
