// compass: the command-line entry point (the verbs are in compass/cli).

#include "compass/cli/app.hpp"

int main(int argc, char** argv) { return compass::cli::run_app(argc, argv); }
