// The `scalebench` executable: dispatches to the command implementations.
#include "orchestrator/cli.h"

int main(int argc, char** argv) { return scalebench::run_cli(argc, argv); }
