"""The Python side of `lockstep run` (python/lockstep/_boot, _torch_hooks, _shim) with a
stand-in torch (fake_torch/) and a stand-in shim (recording_shim.c) that writes what it is sent:
arming on `import torch` only, parameter names, one call per optimizer step, the settings, and
that a failing hook never fails the job.

Run by ctest twice: python3 -m unittest test_torch_hooks, with RECORDING_SHIM and
LOCKSTEP_PYTHON_DIR in the environment: the package's sources (the Python hook does every step)
and the build's staged package, with lockstep._state_hook (the steady step in C,
python/src/state_hook.cpp). Every test holds for both."""

import os
import re
import subprocess
import sys
import textwrap

import tempfile
import unittest
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.environ.get("LOCKSTEP_PYTHON_DIR", os.path.join(HERE, "..", "..", "..", "python"))
SHIM = os.environ.get("RECORDING_SHIM")
# Whether this package has the C steady step (an .abi3.so next to the .py files).
STEADY_IN_C = any(name.startswith("_state_hook") and name.endswith(".so")
                  for name in os.listdir(os.path.join(PYTHON_DIR, "lockstep")))
# And the module scopes' hooks in C (python/src/scope_hooks.cpp), built with it.
SCOPES_IN_C = any(name.startswith("_scope_hooks") and name.endswith(".so")
                  for name in os.listdir(os.path.join(PYTHON_DIR, "lockstep")))


MODEL = textwrap.dedent("""
    import torch, torch.nn as nn
    P = nn.Parameter
    class Wrapper(nn.Module):  # torch.compile's OptimizedModule keeps the model as _orig_mod
        pass
    model = nn.Module(tok=nn.Module(weight=P(0x1000, 64)),
                      blocks=nn.Module(**{"0": nn.Module(mlp=nn.Module(up=nn.Module(
                          weight=P(0x2000, 256), bias=P(0x3000, 16))))}))
    compiled = Wrapper(_orig_mod=model)
    opt = torch.optim.Optimizer(model.parameters())
    """)


def run(body, tmp_path, preload=True, extra_env=None, extra_path=()):
    record = tmp_path / "calls.txt"
    record.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKSTEP_")}
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(PYTHON_DIR, "lockstep", "_boot"), PYTHON_DIR, *extra_path,
         os.path.join(HERE, "fake_torch")])
    env["LOCKSTEP_TEST_RECORD"] = str(record)
    env["LOCKSTEP_LEVEL"] = "broad"
    if preload:
        env["LD_PRELOAD"] = SHIM
    env.update(extra_env or {})
    done = subprocess.run([sys.executable, "-c", body], env=env, capture_output=True, text=True,
                          timeout=60)
    calls = record.read_text() if record.exists() else ""
    return done, calls


@unittest.skipIf(not SHIM, "RECORDING_SHIM not built")
class TorchHooks(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.tmp = Path(self._dir.name)

    def tearDown(self):
        self._dir.cleanup()

    def test_parameters_are_fingerprinted_by_their_path_after_every_optimizer_step(self):
        tmp_path = self.tmp
        done, calls = run(MODEL + "opt.step(); opt.step()", tmp_path)
        assert done.returncode == 0, done.stderr
        one_step = ("state n=3 kind=0 stream=0x51\n"
                    "  tok.weight 0x1000 64\n"
                    "  blocks.0.mlp.up.weight 0x2000 256\n"
                    "  blocks.0.mlp.up.bias 0x3000 16\n")
        assert calls == one_step * 2


    def test_the_steady_step_asks_whether_its_stream_captures_only_once_a_capture_began(self):
        # Before the process's first capture (the shim's lockstep_capture_begun) no stream can
        # be capturing: the C steady step does not ask torch (a runtime call, run cold once a
        # step). The first step is the Python hook's, which asks; so does every step without C.
        body = MODEL + "opt.step(); opt.step(); opt.step(); print(1000 - len(torch._C._capture_answers))"
        for begun, asked_in_c in ((False, 1), (True, 3)):
            extra = {"LOCKSTEP_TEST_CAPTURE_BEGUN": "1"} if begun else {}
            done, calls = run(body, self.tmp, extra_env=extra)
            assert done.returncode == 0, done.stderr
            assert len(calls.split("state ")[1:]) == 3, calls
            assert int(done.stdout) == (asked_in_c if STEADY_IN_C else 3), (begun, done.stdout)

    def test_under_lockstep_debug_the_hook_reports_its_own_time_its_first_call_apart(self):
        # The first step walks the names and prepares the call (slow); the next two only send.
        done, calls = run(MODEL + "opt.step(); opt.step(); opt.step()", self.tmp,
                          extra_env={"LOCKSTEP_DEBUG": "1"})
        assert done.returncode == 0, done.stderr
        assert calls.count("state n=3") == 3, calls
        line = [l for l in done.stderr.splitlines() if "python state hook self time" in l]
        assert len(line) == 1, done.stderr
        assert re.search(r"lockstep\[\d+\]: python state hook self time: 2 x [1-9][0-9]* ns "
                         r"\(\+1 slow, [0-9.]+ ms\)$", line[0]), line[0]
        # The C steady step's two calls by part (capture check, parameters, pointers, send).
        parts = [l for l in done.stderr.splitlines() if "steady step in C by part" in l]
        assert len(parts) == (1 if STEADY_IN_C else 0), done.stderr
        if STEADY_IN_C:
            assert re.search(r"by part: capture check \d+ ns, parameters \d+ ns, pointers \d+ ns, "
                             r"stream and state call \d+ ns$", parts[0]), parts[0]
        done, _ = run(MODEL + "opt.step()", self.tmp)  # without LOCKSTEP_DEBUG: no line
        assert "python state hook" not in done.stderr, done.stderr
        assert "steady step in C" not in done.stderr, done.stderr

    def test_a_parameter_that_moved_is_sent_where_it_is_now(self):
        # The call is prepared once and kept while every parameter's pointer holds: a parameter
        # moved in place (p.data = ..., a sharded parameter gathered elsewhere) is sent at its
        # new pointer the next step, and a CPU parameter that went to the GPU joins the call.
        body = MODEL + textwrap.dedent("""
            cpu = P(0x7000, 8, device="cpu")
            opt.param_groups.append({"params": [cpu]})
            opt.step()
            model.parameters()[0]._ptr = 0x4000
            opt.step()
            cpu._ptr, cpu.device, cpu.is_cuda = 0x8000, "cuda:0", True
            opt.step()
            """)
        done, calls = run(body, self.tmp)
        assert done.returncode == 0, done.stderr
        steps = calls.split("state ")[1:]
        assert len(steps) == 3, calls
        assert "tok.weight 0x1000 64" in steps[0] and "0x7000" not in steps[0], steps[0]
        assert "tok.weight 0x4000 64" in steps[1] and "0x7000" not in steps[1], steps[1]
        assert steps[2].startswith("n=4 ") and "param3 0x8000 8" in steps[2], steps[2]

    def test_the_stream_is_read_each_step_by_device_index_where_torch_has_the_raw_getter(self):
        # torch._C._cuda_getCurrentRawStream answers the handle without making a Stream object;
        # it is asked for the parameters' device index every step (the job may change streams
        # between steps), and torch.cuda.current_stream is not called.
        body = MODEL + textwrap.dedent("""
            class Device:
                index = 0
            streams = iter([0x61, 0x62])
            asked = []
            torch._C._cuda_getCurrentRawStream = lambda i: asked.append(i) or next(streams)
            torch.cuda.current_stream = None  # a call of it would fail the hook
            device = Device()
            for p in model.parameters():
                p.device = device
            opt.step(); opt.step()
            assert asked == [0, 0], asked
            """)
        done, calls = run(body, self.tmp)
        assert done.returncode == 0, done.stderr
        assert "stopped" not in done.stderr, done.stderr
        steps = calls.split("state ")[1:]
        assert [s.split("\n")[0] for s in steps] == ["n=3 kind=0 stream=0x61",
                                                     "n=3 kind=0 stream=0x62"], calls

    def test_under_step_on_optimizer_each_optimizer_step_ends_a_step_after_its_state(self):
        # LOCKSTEP_STEP_ON=optimizer: the step ends after each optimizer step (a Trainer's
        # step, whatever small copies it makes), after the step's State records; at metrics,
        # with no State records, too. By default no step is ended here (the test above).
        one_step = ("state n=3 kind=0 stream=0x51\n"
                    "  tok.weight 0x1000 64\n"
                    "  blocks.0.mlp.up.weight 0x2000 256\n"
                    "  blocks.0.mlp.up.bias 0x3000 16\n"
                    "step\n")
        done, calls = run(MODEL + "opt.step(); opt.step(); opt.step()", self.tmp,
                          extra_env={"LOCKSTEP_STEP_ON": "optimizer"})
        assert done.returncode == 0, done.stderr
        assert calls == one_step * 3, calls
        done, calls = run(MODEL + "opt.step(); opt.step()", self.tmp,
                          extra_env={"LOCKSTEP_STEP_ON": "optimizer", "LOCKSTEP_LEVEL": "metrics"})
        assert done.returncode == 0, done.stderr
        assert calls == "step\n" * 2, calls

    def test_the_steady_step_in_c_promises_the_shim_its_names_are_the_last_calls(self):
        # LOCKSTEP_SAME_NAMES (collectors/lockstep.h): the C steady step sends its prepared
        # Batch's arrays, unchanged, after the Python hook's call that prepared them: the shim
        # need not read 77 cold names again. The Python hook's own calls never promise it.
        done, calls = run(MODEL + "opt.step(); opt.step(); opt.step()", self.tmp,
                          extra_env={"LOCKSTEP_TEST_SHOW_SAME_NAMES": "1"})
        assert done.returncode == 0, done.stderr
        heads = [s.split("\n")[0] for s in calls.split("state ")[1:]]
        plain, promised = "n=3 kind=0 stream=0x51", "n=3 kind=0 stream=0x51 same-names"
        assert heads == ([plain, promised, promised] if STEADY_IN_C else [plain] * 3), calls

    def test_a_steady_step_runs_only_the_hooks_own_python_functions(self):
        # The hook runs cold once a step, after the job's own work: each Python frame costs there
        # what a C loop does not. Once the names are found and the call prepared, a step runs
        # the hook's own __call__, record and send, and the state call's send: no function of
        # torch's Python (torch._C's capture check, not torch.cuda's wrapper of it), none of
        # weakref's (the last optimizer is remembered) and no generator (the param groups).
        # With the steady step in C, none at all.
        body = MODEL + textwrap.dedent("""
            import collections, sys
            torch._C._cuda_getCurrentRawStream = {0: 0x61}.get  # a C function, as torch's
            class Device:
                index = 0
            device = Device()
            for p in model.parameters():
                p.device = device
            opt.step()  # names walked, call prepared
            seen = collections.Counter()
            def profile(frame, event, arg):
                if event == "call":
                    seen[frame.f_code.co_filename.rsplit("/", 1)[-1] + ":" + frame.f_code.co_name] += 1
            sys.setprofile(profile)
            opt.step()
            sys.setprofile(None)
            del seen["optimizer.py:step"]  # the stand-in optimizer's own
            del seen["__init__.py:data_ptr"]  # the stand-in tensor's: torch's is a C method
            print(sorted(seen.items()))
            """)
        done, calls = run(body, self.tmp)
        assert done.returncode == 0, done.stderr
        assert "stopped" not in done.stderr, done.stderr
        assert len(calls.split("state ")[1:]) == 2, calls
        python_frames = {} if STEADY_IN_C else {
            "_torch_hooks.py:__call__": 1, "_torch_hooks.py:record": 1,
            "_torch_hooks.py:send": 1, "_shim.py:send": 1}
        assert done.stdout.strip() == str(sorted(python_frames.items())), done.stdout

    def test_the_steady_step_runs_in_c_where_the_extension_is_built(self):
        done, _ = run(MODEL + "opt.step()", self.tmp, extra_env={"LOCKSTEP_DEBUG": "1"})
        assert done.returncode == 0, done.stderr
        armed = [l for l in done.stderr.splitlines() if "PyTorch hooks:" in l]
        assert len(armed) == 1, done.stderr
        assert ("(steady step in C)" in armed[0]) == STEADY_IN_C, armed[0]
        # Gradients change every step: asked for, every step is the Python hook's.
        done, _ = run(MODEL + "opt.step()", self.tmp,
                      extra_env={"LOCKSTEP_DEBUG": "1", "LOCKSTEP_STATE": "params,grads"})
        assert "steady step in C" not in done.stderr, done.stderr

    def test_a_new_optimizer_and_a_parameter_added_or_dropped_are_sent_as_they_are_now(self):
        # Each is a change the steady step must see: it hands the step to the Python hook.
        body = MODEL + textwrap.dedent("""
            params = model.parameters()
            opt.step(); opt.step()
            opt.param_groups[0]["params"].append(P(0x6000, 4))
            opt.step()
            opt.param_groups[0]["params"] = params[:2]
            opt.step()
            other = torch.optim.Optimizer(params[2:])
            other.step()
            opt.step()
            """)
        done, calls = run(body, self.tmp)
        assert done.returncode == 0, done.stderr
        heads = [s.split("\n")[0] for s in calls.split("state ")[1:]]
        assert heads == ["n=3 kind=0 stream=0x51"] * 2 + ["n=4 kind=0 stream=0x51"] + [
            "n=2 kind=0 stream=0x51", "n=1 kind=0 stream=0x51", "n=2 kind=0 stream=0x51"], calls
        assert "param3 0x6000 4" in calls and "stopped" not in done.stderr, done.stderr

    def test_an_error_in_a_steady_step_stops_the_state_records_with_one_line(self):
        # A parameter whose pointer can no longer be read after the call was prepared: the step
        # goes to the Python hook, which meets the error, says so once, and stops.
        body = MODEL + textwrap.dedent("""
            opt.step(); opt.step()
            def broken(self):
                raise RuntimeError("no pointer")
            torch.Tensor.data_ptr = broken
            opt.step(); opt.step()
            print("job finished")
            """)
        done, calls = run(body, self.tmp)
        assert done.returncode == 0, done.stderr
        assert "job finished" in done.stdout
        assert done.stderr.count("lockstep: state records stopped: RuntimeError: no pointer") == 1, \
            done.stderr
        assert calls.count("state n=3") == 2, calls

    def test_pointers_are_read_by_torchs_c_method_unless_a_parameters_type_has_its_own(self):
        # Plain parameters: TensorBase.data_ptr itself, no bound method made for each. A subclass
        # with a data_ptr of its own makes every parameter read as p.data_ptr(), and is sent at
        # the pointer its own method answers.
        body = MODEL + textwrap.dedent("""
            from lockstep import _torch_hooks as hooks
            torch._C.TensorBase = torch.Tensor
            params = list(model.parameters())
            assert hooks.pointer_function(torch, params) is torch.Tensor.data_ptr
            class Own(P):
                def data_ptr(self):
                    return 0x9000
            own = Own(0x5000, 8)
            assert hooks.pointer_function(torch, params + [own]) is hooks._data_ptr
            opt.step()
            opt.param_groups.append({"params": [own]})
            opt.step()
            """)
        done, calls = run(body, self.tmp)
        assert done.returncode == 0, done.stderr
        steps = calls.split("state ")[1:]
        assert len(steps) == 2 and "tok.weight 0x1000 64" in steps[0], calls
        assert "param3 0x9000 8" in steps[1] and "0x5000" not in steps[1], steps[1]

    def test_a_numbered_step_sends_the_jobs_number_and_a_bare_step_none(self):
        body = "import lockstep._shim as s\ns.step(12)\ns.step()\ns.step(n=0)\n"
        done, calls = run(body, self.tmp)
        assert done.returncode == 0, done.stderr
        assert calls == "step 12\nstep\nstep 0\n", calls

    def test_dead_weak_proxies_among_the_live_objects_do_not_stop_the_names(self):
        # Found on the H200: isinstance() on a dead weakref.proxy raises ReferenceError.
        body = "import weakref\nclass X: pass\nx = X(); keep = [weakref.proxy(x)]; del x\n"
        done, calls = run(body + MODEL + "opt.step()", self.tmp)
        assert done.returncode == 0, done.stderr
        assert "stopped" not in done.stderr, done.stderr
        assert "  blocks.0.mlp.up.weight 0x2000 256\n" in calls, calls

    def test_nothing_is_armed_in_a_job_that_never_imports_torch(self):
        tmp_path = self.tmp
        done, calls = run("import sys; assert 'lockstep._torch_hooks' not in sys.modules", tmp_path)
        assert done.returncode == 0, done.stderr
        assert calls == ""


    def test_state_off_and_the_metrics_level_record_no_state(self):
        tmp_path = self.tmp
        for env in ({"LOCKSTEP_STATE": "off"}, {"LOCKSTEP_LEVEL": "metrics"}):
            done, calls = run(MODEL + "opt.step()", tmp_path, extra_env=env)
            assert done.returncode == 0, done.stderr
            assert calls == "", env


    def test_without_the_shim_the_hooks_do_nothing(self):
        tmp_path = self.tmp
        done, calls = run(MODEL + "opt.step()", tmp_path, preload=False)
        assert done.returncode == 0, done.stderr
        assert calls == ""


    def test_gradients_and_optimizer_state_come_when_asked_for(self):
        tmp_path = self.tmp
        body = MODEL + textwrap.dedent("""
            w = model.parameters()[1]
            w.grad = torch.Tensor(0x9000, 256)
            opt.state[w] = {"exp_avg": torch.Tensor(0xa000, 256), "step": 3}
            opt.step()
            """)
        done, calls = run(body, tmp_path, extra_env={"LOCKSTEP_STATE": "all"})
        assert done.returncode == 0, done.stderr
        assert "state n=1 kind=1 stream=0x51\n  blocks.0.mlp.up.weight:grad 0x9000 256\n" in calls
        assert "state n=1 kind=2 stream=0x51\n  blocks.0.mlp.up.weight:exp_avg 0xa000 256\n" in calls


    def test_a_failing_hook_says_so_once_and_the_job_goes_on(self):
        tmp_path = self.tmp
        body = MODEL + textwrap.dedent("""
            opt.param_groups[0]["params"].append(object())  # not a tensor: the hook fails
            opt.step(); opt.step()
            print("job finished")
            """)
        done, calls = run(body, tmp_path)
        assert done.returncode == 0, done.stderr
        assert "job finished" in done.stdout
        assert done.stderr.count("lockstep: state records stopped") == 1, done.stderr


    def test_the_sitecustomize_it_shadows_still_runs(self):
        tmp_path = self.tmp
        other = tmp_path / "site"
        other.mkdir()
        (other / "sitecustomize.py").write_text("print('their sitecustomize ran')\n")
        done, _ = run("pass", tmp_path, extra_path=[str(other)])
        assert done.returncode == 0, done.stderr
        assert "their sitecustomize ran" in done.stdout


GPT = textwrap.dedent("""
    import torch, torch.nn as nn
    class GPT(nn.Module): pass
    class Embedding(nn.Module): pass
    class Block(nn.Module): pass
    class MLP(nn.Module): pass
    class Blocks(nn.Module): pass
    model = GPT(tok=Embedding(), blocks=Blocks(**{"0": Block(mlp=MLP())}))
    opt = torch.optim.Optimizer(model.parameters())
    record = open(__import__("os").environ["LOCKSTEP_TEST_RECORD"], "a", buffering=1)
    def kernel(node):  # what the node's own kernels would be: made inside its scope
        record.write("kernel " + node.name + "\\n")
    """)


@unittest.skipIf(not SHIM, "RECORDING_SHIM not built")
class ModuleScopes(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.tmp = Path(self._dir.name)

    def tearDown(self):
        self._dir.cleanup()

    def run_job(self, body, **env):
        done, calls = run(GPT + body, self.tmp, extra_env={"LOCKSTEP_STATE": "off", **env})
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertNotIn("stopped", done.stderr)
        return calls

    def test_each_modules_forward_is_a_scope_named_by_its_path_in_the_model(self):
        calls = self.run_job("model(torch.Tensor(0, 4))", LOCKSTEP_SCOPES="1")
        self.assertEqual(calls, "push GPT (forward)\n"
                                "push tok (forward)\n"
                                "pop\n"
                                "push blocks (forward)\n"
                                "push blocks.0 (forward)\n"
                                "push blocks.0.mlp (forward)\n"
                                "pop\npop\npop\npop\n")

    def test_a_modules_backward_is_a_scope_on_autograds_thread_around_its_own_nodes(self):
        body = ("x = torch.Tensor(0, 4, grad_fn=torch.autograd.Node('input'))\n"
                "model(x)\n"
                "open(record.name, 'w').close()  # the backward only\n"
                "torch.autograd.backward(on_node=kernel)\n")
        calls = self.run_job(body, LOCKSTEP_SCOPES="1")
        other = " [other thread]"
        self.assertEqual(calls, f"push GPT (backward){other}\n"
                                "kernel GPT\n"
                                f"pop{other}\npush blocks (backward){other}\n"
                                "kernel Blocks\n"
                                f"pop{other}\npush blocks.0 (backward){other}\n"
                                "kernel Block\n"
                                f"pop{other}\npush blocks.0.mlp (backward){other}\n"
                                "kernel MLP\n"
                                f"pop{other}\npush tok (backward){other}\n"
                                "kernel Embedding\n"
                                # the model's input came from outside every module: no scope
                                f"pop{other}\n"
                                "kernel input\n")

    def test_the_optimizer_step_is_a_scope(self):
        calls = self.run_job("opt.step()", LOCKSTEP_SCOPES="1")
        self.assertEqual(calls, "push optimizer.step\npop\n")

    def test_inside_a_region_dynamo_compiles_the_hooks_do_nothing(self):
        body = "torch.compiler.compiling = True\nmodel(torch.Tensor(0, 4))\n"
        self.assertEqual(self.run_job(body, LOCKSTEP_SCOPES="1"), "")

    def test_auto_names_modules_at_full_and_not_at_broad_and_off_never(self):
        body = "model(torch.Tensor(0, 4)); opt.step()"
        self.assertIn("push GPT (forward)", self.run_job(body, LOCKSTEP_LEVEL="full"))
        self.assertEqual(self.run_job(body, LOCKSTEP_LEVEL="broad"), "")
        self.assertEqual(self.run_job(body, LOCKSTEP_LEVEL="full", LOCKSTEP_SCOPES="0"), "")

    def test_the_hooks_run_in_c_where_the_extension_is_built(self):
        done, _ = run(GPT + "model(torch.Tensor(0, 4))", self.tmp,
                      extra_env={"LOCKSTEP_SCOPES": "1", "LOCKSTEP_DEBUG": "1",
                                 "LOCKSTEP_STATE": "off"})
        self.assertEqual(done.returncode, 0, done.stderr)
        armed = [l for l in done.stderr.splitlines() if "PyTorch hooks:" in l]
        self.assertEqual(len(armed), 1, done.stderr)
        self.assertEqual("module scopes (in C)" in armed[0], SCOPES_IN_C, armed[0])

    def test_a_module_input_hook_gives_way_to_the_output_hook_of_the_module_that_made_it(self):
        # `inner` is called on a tensor an earlier module returned; the outer module then
        # returns inner's input node as its own output (an identity): the node first got inner's
        # input hook (the enclosing scope, outer's backward), then outer's output hook: one hook,
        # outer's, set once, and the kernels of that node run in "outer (backward)".
        body = textwrap.dedent("""
            class Outer(nn.Module):
                def forward(self, x):
                    self.x = torch.Tensor(0, 4, grad_fn=torch.autograd.Node('made'))
                    self._children['inner'](self.x)
                    return self.x
            outer = Outer(inner=MLP())
            outer(torch.Tensor(0, 4))
            open(record.name, 'w').close()
            torch.autograd.backward(on_node=kernel)
            print(len(outer.x.grad_fn._prehooks))
            """)
        done, calls = run(GPT + body, self.tmp,
                          extra_env={"LOCKSTEP_SCOPES": "1", "LOCKSTEP_STATE": "off"})
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), "1")
        other = " [other thread]"
        self.assertEqual(calls, f"push inner (backward){other}\n"
                                "kernel MLP\n"
                                f"pop{other}\npush Outer (backward){other}\n"
                                "kernel made\n")

    def test_a_failing_hook_stops_the_scopes_with_one_line_and_the_job_goes_on(self):
        body = ("nn.Module.named_modules = None  # naming the model now fails\n"
                "model(torch.Tensor(0, 4)); model(torch.Tensor(0, 4)); print('done')")
        done, calls = run(GPT + body, self.tmp,
                          extra_env={"LOCKSTEP_SCOPES": "1", "LOCKSTEP_STATE": "off"})
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stderr.count("lockstep: module scopes stopped"), 1, done.stderr)
        self.assertIn("done", done.stdout)


if __name__ == "__main__":
    unittest.main()
