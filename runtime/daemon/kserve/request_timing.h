#pragma once
// The server-side times an HTTP infer response reports (measured): when the request arrived, this
// thread's CPU time, and the two figures that are known only once the response header is encoded
// (server time and server CPU time), which are written last over placeholders in that header so
// they include its encoding.
//
//   const Arrival arrival{req.arrival, thread_cpu_us()};   // at the handler's start
//   header.parameters["dype_server_time_us"] = kServerTimeSlot;   ... encode ...
//   fill_slot(body, kServerTimeSlot, elapsed_us(arrival.wall, std::chrono::steady_clock::now()));
#include <chrono>
#include <string>

namespace dype::rt::daemon {

// CPU time of the calling thread: the handler thread blocks while the engine runs, so its CPU time
// over a request is the front end's own work, unaffected by waiting for a core on a busy machine.
double thread_cpu_us();

inline double elapsed_us(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

// When the transport had parsed a request's line and headers (the start of the server time), and
// the handler thread's CPU time when it took the request (the start of the server CPU time: the
// body is read by the I/O threads, whose time is shared by every connection).
struct Arrival {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  double cpu_us = 0.0;
};

// Placeholders for values known only once the response header is encoded: distinctive doubles
// whose JSON text (23 characters) is overwritten by the value, right-aligned (JSON allows the
// leading spaces).
constexpr double kServerTimeSlot = 1.2345678901234567e+300;
constexpr double kServerCpuSlot = 1.2345678901234567e+301;

// Overwrites `slot`'s placeholder text in `body` with `value` (one decimal); Error when the
// placeholder is missing or the value does not fit.
void fill_slot(std::string& body, double slot, double value);

}  // namespace dype::rt::daemon
