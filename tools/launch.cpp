#include "tools/launch.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <random>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/env.h"
#include "common/settings.h"
#include "tools/python_env.h"
#include "tools/run_set.h"
#include "trace/run_dir.h"

namespace lockstep::tools {

namespace fs = std::filesystem;

namespace {

volatile sig_atomic_t child_pid = 0;

// Signals sent to this process by kill(2) go to the job; those the terminal sends to the whole
// foreground group already reached the job and are not sent twice.
void forward_signal(int sig, siginfo_t* info, void*) {
  if (child_pid > 0 && (info == nullptr || info->si_code == SI_USER || info->si_code == SI_QUEUE))
    kill(child_pid, sig);
}

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

std::string new_run_id() {
  std::random_device device;
  uint64_t bits =
      (static_cast<uint64_t>(device()) << 32) ^ device() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return fmt::format("lockstep-{:016x}", bits);
}

}  // namespace

std::string find_shim() {
  if (const char* lib = std::getenv(env::kLib); lib && *lib) {
    if (!fs::exists(lib)) throw InputError(fmt::format("{}: {} names no file", lib, env::kLib));
    return fs::absolute(lib).string();
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const char* rel : {"../lib/liblockstep.so", "../interpose/liblockstep.so"}) {
      fs::path candidate = (exe.parent_path() / rel).lexically_normal();
      if (fs::exists(candidate)) return candidate.string();
    }
  }
  throw InputError(
      fmt::format("{}: liblockstep.so not found in ../lib or ../interpose next to "
                  "this binary; set {}",
                  ec ? "lockstep" : exe.string(), env::kLib));
}

std::string default_trace_dir() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[64];
  std::strftime(buf, sizeof(buf), "lockstep-trace-%Y%m%d-%H%M%S", &local);
  // mkdir is atomic: of two commands in one second, one gets the name and the other EEXIST.
  for (int n = 1; n <= 1000; ++n) {
    std::string name = n == 1 ? std::string(buf) : fmt::format("{}-{}", buf, n);
    if (::mkdir(name.c_str(), 0777) == 0) return name;
    if (errno != EEXIST)
      throw InputError(
          fmt::format("{}: cannot be created: {} (choose one with -o)", name, strerror(errno)));
  }
  throw InputError(
      fmt::format("{}-1000: taken, like every name before it (choose one with -o)", buf));
}

void parse_step_range(const std::string& text, const std::string& what, uint32_t& first,
                      uint32_t& last) {
  const settings::Setting& steps = settings::get(settings::Id::Steps);
  if (auto why = settings::problem(steps, text))
    throw InputError(fmt::format("{}: '{}' {}", what, text, *why));
  const settings::StepWindow window = *settings::parse_step_window(text);
  first = window.first;
  last = window.last;
}

RequestField request_field(TraceRequest& request, settings::Id id) {
  switch (id) {
    case settings::Id::Dir:
      return {&request.dir, nullptr};
    case settings::Id::Level:
      return {&request.level, nullptr};
    case settings::Id::Steps:
      return {&request.steps, nullptr};
    case settings::Id::Kernels:
      return {&request.kernels, nullptr};
    case settings::Id::Stacks:
      return {&request.stacks, nullptr};
    case settings::Id::State:
      return {&request.state, nullptr};
    case settings::Id::Overwrite:
      return {nullptr, &request.overwrite};
    default:
      return {};
  }
}

void check_request(const TraceRequest& request) {
  TraceRequest copy = request;
  for (const settings::Setting& setting : settings::all()) {
    const RequestField field = request_field(copy, setting.id);
    if (field.text != nullptr && !field.text->empty()) {
      if (auto why = settings::problem(setting, *field.text))
        throw InputError(
            fmt::format("{}: '{}' {}", settings::long_flag(setting), *field.text, *why));
      continue;
    }
    if (field.flag != nullptr && *field.flag) continue;
    // What launch_traced sets itself, and what only this CLI reads (find_shim checks it).
    if (setting.id == settings::Id::Dir || setting.id == settings::Id::RunId ||
        setting.id == settings::Id::FromCli || setting.id == settings::Id::Lib)
      continue;
    if (const char* value = std::getenv(setting.name)) {
      if (auto why = settings::problem(setting, value))
        throw InputError(fmt::format("{}={} (from the environment) {}", setting.name, value, *why));
    }
  }
  // The allocator modes: their parsers throw InputError for an unknown one.
  torch_allocator_env(request.torch_alloc, "full", nullptr);
  xla_allocator_env(request.jax_alloc, "full", nullptr, nullptr);
  xla_command_buffer_env(request.jax_graphs, "full", nullptr);
}

bool looks_like_pytorch(const std::vector<std::string>& command) {
  for (const std::string& arg : command) {
    const std::string name = fs::path(arg).filename().string();
    if (name.starts_with("python") || name == "torchrun" || name == "accelerate" ||
        name == "deepspeed" || (name.size() > 3 && name.ends_with(".py")))
      return true;
  }
  return false;
}

EnvChange torch_allocator_env(const std::string& mode, const std::string& level,
                              const char* user_alloc_conf) {
  EnvChange change;
  const bool user_set = user_alloc_conf != nullptr && *user_alloc_conf != '\0';
  std::string chosen = mode;
  if (mode == "auto") chosen = level == "full" && !user_set ? "async" : "keep";
  if (chosen == "keep") return change;
  if (chosen == "none") {
    change.set.emplace_back("PYTORCH_NO_CUDA_MEMORY_CACHING", "1");
    change.note = "PyTorch allocator: no caching (PYTORCH_NO_CUDA_MEMORY_CACHING=1)";
    return change;
  }
  if (chosen != "async")
    throw InputError(fmt::format("--torch-alloc: '{}' is not auto, async, none or keep", mode));
  std::string conf = user_set ? std::string(user_alloc_conf) : std::string();
  if (conf.find("backend:") != std::string::npos) return change;  // the user chose a backend
  conf += std::string(conf.empty() ? "" : ",") + "backend:cudaMallocAsync";
  change.set.emplace_back("PYTORCH_CUDA_ALLOC_CONF", conf);
  change.note =
      "PyTorch allocator: cudaMallocAsync, so that kernel regions are exact tensors "
      "(--torch-alloc keep to leave it)";
  return change;
}

EnvChange xla_allocator_env(const std::string& mode, const std::string& level,
                            const char* user_allocator, const char* user_preallocate) {
  EnvChange change;
  const auto set = [](const char* v) { return v != nullptr && *v != '\0'; };
  if (mode != "auto" && mode != "platform" && mode != "keep")
    throw InputError(fmt::format("--jax-alloc: '{}' is not auto, platform or keep", mode));
  const bool platform = mode == "platform" || (mode == "auto" && level == "full");
  if (!platform || (mode == "auto" && set(user_allocator))) return change;
  change.set.emplace_back("XLA_PYTHON_CLIENT_ALLOCATOR", "platform");
  // The platform allocator never preallocates; said outright so that a reader of the job's
  // environment needs no JAX documentation. A user's own value is left.
  if (!set(user_preallocate)) change.set.emplace_back("XLA_PYTHON_CLIENT_PREALLOCATE", "false");
  change.note =
      "JAX/XLA allocator: platform (XLA_PYTHON_CLIENT_ALLOCATOR=platform, one allocation per "
      "buffer), so that kernel regions are exact buffers (--jax-alloc keep to leave it)";
  return change;
}

EnvChange xla_command_buffer_env(const std::string& mode, const std::string& level,
                                 const char* user_xla_flags) {
  constexpr std::string_view kFlag = "--xla_gpu_enable_command_buffer";
  EnvChange change;
  if (mode != "auto" && mode != "off" && mode != "keep")
    throw InputError(fmt::format("--jax-graphs: '{}' is not auto, off or keep", mode));
  const std::string flags = user_xla_flags != nullptr ? user_xla_flags : "";
  const bool user_chose = flags.find(kFlag) != std::string::npos;
  const bool off = mode == "off" || (mode == "auto" && level == "full" && !user_chose);
  if (!off) return change;
  // XLA parses its flags in order: the last one given wins, so "off" overrides the user's.
  change.set.emplace_back("XLA_FLAGS",
                          flags + (flags.empty() ? "" : " ") + std::string(kFlag) + "=");
  change.note =
      "XLA command buffers: off (XLA_FLAGS --xla_gpu_enable_command_buffer=), so that each "
      "kernel is fingerprinted on its own, not only the whole graph (--jax-graphs keep to leave "
      "them)";
  return change;
}

LaunchResult launch_traced(const TraceRequest& request) {
  if (request.command.empty()) throw InputError("lockstep: no command given after --");
  check_request(request);
  // The level the shim will use, by its name in lower case (torch_allocator_env compares it).
  std::string level = request.level;
  if (level.empty()) {
    const char* from_env = std::getenv(env::kLevel);
    level = from_env != nullptr && *from_env ? from_env : "";
  }
  level = settings::kLevelNames[settings::parse_level(level).value_or(settings::kDefaultLevel)];
  const EnvChange allocator =
      torch_allocator_env(request.torch_alloc, level, std::getenv("PYTORCH_CUDA_ALLOC_CONF"));
  const EnvChange xla_allocator =
      xla_allocator_env(request.jax_alloc, level, std::getenv("XLA_PYTHON_CLIENT_ALLOCATOR"),
                        std::getenv("XLA_PYTHON_CLIENT_PREALLOCATE"));
  const EnvChange xla_graphs =
      xla_command_buffer_env(request.jax_graphs, level, std::getenv("XLA_FLAGS"));
  std::string shim = find_shim();
  // A Python job gets lockstep's package and its start-up hook (python_env.h); computed before
  // fork: the child only calls setenv and exec.
  const std::string python = python_path(std::getenv("PYTHONPATH"));
  LaunchResult result;
  result.run_id = new_run_id();
  std::string dir = fs::absolute(request.dir).lexically_normal().string();
  std::string error;
  if (!trace::prepare_run_dir({dir, result.run_id, request.overwrite}, &error))
    throw InputError(error.empty() ? dir + ": cannot be used as a trace directory"
                                   : settings::cli_wording(error));

  std::unique_ptr<JobLog> log;
  if (request.output != JobOutput::Inherit) {
    FILE *echo_out, *echo_err;
    job_echo_targets(request.output, &echo_out, &echo_err);
    log = std::make_unique<JobLog>((fs::path(dir) / kJobLogName).string(), echo_out, echo_err);
  }

  // A pipe closed by exec tells the parent whether exec worked.
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) throw InputError(std::string("pipe: ") + strerror(errno));
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) throw InputError(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    close(status_pipe[0]);
    if (log) log->attach_child();
    std::string preload = shim;
    if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
    setenv("LD_PRELOAD", preload.c_str(), 1);
    setenv(env::kDir, dir.c_str(), 1);
    setenv(env::kRunId, result.run_id.c_str(), 1);
    setenv(env::kFromCli, "1", 1);
    if (!request.level.empty()) setenv(env::kLevel, request.level.c_str(), 1);
    if (!request.steps.empty()) setenv(env::kSteps, request.steps.c_str(), 1);
    if (!request.kernels.empty()) setenv(env::kKernels, request.kernels.c_str(), 1);
    if (!request.stacks.empty()) setenv(env::kStacks, request.stacks.c_str(), 1);
    if (request.overwrite) setenv(env::kOverwrite, "1", 1);
    if (!request.state.empty()) setenv(env::kState, request.state.c_str(), 1);
    if (!python.empty()) setenv("PYTHONPATH", python.c_str(), 1);
    for (const auto& [name, value] : allocator.set) setenv(name.c_str(), value.c_str(), 1);
    for (const auto& [name, value] : xla_allocator.set) setenv(name.c_str(), value.c_str(), 1);
    for (const auto& [name, value] : xla_graphs.set) setenv(name.c_str(), value.c_str(), 1);
    for (const auto& [name, value] : request.job_env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> argv;
    for (const std::string& arg : request.command) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    int err = errno;
    (void)!write(status_pipe[1], &err, sizeof(err));
    _exit(127);
  }
  close(status_pipe[1]);
  if (!allocator.note.empty() && looks_like_pytorch(request.command))
    std::fprintf(stderr, "lockstep: %s\n", allocator.note.c_str());
  if (!xla_allocator.note.empty() && looks_like_pytorch(request.command))
    std::fprintf(stderr, "lockstep: %s\n", xla_allocator.note.c_str());
  if (!xla_graphs.note.empty() && looks_like_pytorch(request.command))
    std::fprintf(stderr, "lockstep: %s\n", xla_graphs.note.c_str());
  child_pid = pid;
  struct sigaction action {
  }, previous[std::size(kForwarded)];
  action.sa_sigaction = forward_signal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < std::size(kForwarded); ++i)
    sigaction(kForwarded[i], &action, &previous[i]);

  int exec_errno = 0;
  ssize_t got;
  do got = read(status_pipe[0], &exec_errno, sizeof(exec_errno));
  while (got < 0 && errno == EINTR);
  close(status_pipe[0]);
  int status = 0;
  if (log)
    status = log->pump_until_exit(pid);
  else
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  child_pid = 0;
  for (size_t i = 0; i < std::size(kForwarded); ++i)
    sigaction(kForwarded[i], &previous[i], nullptr);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (got == sizeof(exec_errno))
    throw InputError(fmt::format("{}: cannot run: {}", request.command[0], strerror(exec_errno)));
  if (WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.exit_code = 128 + WTERMSIG(status);
  return result;
}

}  // namespace lockstep::tools
