#pragma once
// Errors used across dype. Bad user input (files, tensors, configs) raises InputError whose message
// names the field, file/line or key path and the problem; everything else that cannot proceed raises
// Error. Both derive from std::runtime_error so callers that only log can catch one type.
#include <stdexcept>
#include <string>

namespace dype {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Invalid input from outside the process. what() reads "<where>: <problem>".
class InputError : public Error {
 public:
  InputError(const std::string& where, const std::string& problem)
      : Error(where + ": " + problem), where_(where), problem_(problem) {}
  const std::string& where() const noexcept { return where_; }
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::string where_;
  std::string problem_;
};

}  // namespace dype
