// Runs the real `wavecast` binary and collects its exit status and output.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct CliRun {
  int status = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline CliRun wavecast(const std::string& args, const std::string& environment = "") {
  char dir[] = "/tmp/wavecast-cli-XXXXXX";
  if (!mkdtemp(dir))
    return {};
  const std::string out = std::string(dir) + "/out";
  const std::string err = std::string(dir) + "/err";
  const std::string command = environment + " " + std::string(WAVECAST_BINARY) + " " + args + " >" +
                              out + " 2>" + err + " </dev/null";
  const int raw = std::system(command.c_str());
  CliRun run;
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  run.out = slurp(out);
  run.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  rmdir(dir);
  return run;
}
