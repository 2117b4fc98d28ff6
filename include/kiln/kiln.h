// Everything a program that uses Kiln includes: the DSL to build kernels (kiln/dsl.h), and the
// API to compile and launch them on your own buffers (kiln/kernel.h). docs/api.md shows both.
#pragma once

#include "kiln/dsl.h"
#include "kiln/kernel.h"
#include "kiln/result.h"
