"""A stand-in for jax with only what lockstep's JAX hooks touch: jax.profiler's annotations.
Like the real package, `import jax` leaves jax.profiler to be imported."""
