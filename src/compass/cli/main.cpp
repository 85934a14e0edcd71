// compass: the command-line entry point (the application itself is run_app in app.cpp).

#include "compass/cli/common.hpp"

int main(int argc, char** argv) { return compass::cli::run_app(argc, argv); }
