void lockstep_dummy_shim(void) {}
