// LeakSanitizer suppressions and options compiled into every executable of an AddressSanitizer build
// (DYPE_SANITIZE=address,...; see apps/CMakeLists.txt). LSan asks each program for them through
// this hook, so they hold for ctest, for gtest's test discovery at build time and for the apps the
// end-to-end tests start, with no environment to set.
//
// Only third-party libraries belong here, each with the reason:
// - libamdhip64 (ROCm 5.2's HIP runtime, Debian build): __hipRegisterFunction and the runtime's
//   static initialisers allocate their kernel registry at load time and never free it; loading the
//   library (every dype executable does, when the HIP backend is built) leaks ~120 KB at exit.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libamdhip64.so\n";
}

// Quiet about the suppressions it used: the CLI end-to-end tests read an app's stdout and stderr
// together (a JSON answer followed by LSan's table would not parse).
extern "C" const char* __lsan_default_options() { return "print_suppressions=0"; }
