"""Zephyr's GCC flags for an application's code, as tests/zephyr compiles it: read in
zephyrproject-rtos/zephyr's cmake/compiler/gcc/compiler_flags.cmake and top-level
CMakeLists.txt (88ba54c9, a v4.4-era commit; docs/zephyr-verification.md) and Twister's
twisterlib/runner.py (09d52931)."""

from __future__ import annotations

#: warning_base (C and C++) and warning_extended.
WARNINGS = [
    "-Wall", "-Wformat", "-Wformat-security", "-Wno-format-zero-length", "-Wdouble-promotion",
    "-Wpointer-arith", "-Wexpansion-to-defined", "-Wno-unused-but-set-variable",
]  # fmt: skip
#: given to every file (no_strict_aliasing, no_common, and the GCC options of the top level).
COMMON = [
    "-fno-strict-aliasing", "-fno-common", "-fno-asynchronous-unwind-tables",
    "-fno-reorder-functions", "--param=min-pagesize=0", "-fno-defer-pop",
]  # fmt: skip
#: C only: warning_error_implicit_int and -Wno-pointer-sign (CXX_EXCLUDED_OPTIONS).
C_ONLY = ["-Werror=implicit-int", "-Wno-pointer-sign"]
#: C++: dialect_cpp17, no exceptions and no RTTI (CONFIG_CPP_EXCEPTIONS/RTTI off), required.
CXX = ["-std=c++17", "-Wno-register", "-fno-exceptions", "-fno-rtti", "-fcheck-new"]
#: CONFIG_COMPILER_WARNINGS_AS_ERRORS, which Twister sets unless --disable-warnings-as-errors.
WERROR = ["-Werror"]
#: CONFIG_SIZE_OPTIMIZATIONS (the default) and CONFIG_SPEED_OPTIMIZATIONS.
OPTIMIZATIONS = {"size": "-Os", "speed": "-O2"}
