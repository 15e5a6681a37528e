// The LibTorch SelfTest (protocol/self_test.h): what `scalebench selftest` checks on each
// allocation, on CPU and GPU. Note [Self-test checks] in self_test.cc.
#pragma once

#include <memory>

#include "protocol/self_test.h"

namespace scalebench {

std::unique_ptr<SelfTest> make_self_test();

}  // namespace scalebench
