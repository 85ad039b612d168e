# find_package(cortex_m_nn <version>): the version is the Python package's
# (python/cortex_m_nn/version.py, beside this tree's kernels and recorded in every .pte). Before
# 1.0 a minor version may change the program format, so a request is met by the same minor
# version at or after it: 0.1.3 meets 0.1 and 0.1.2, not 0.2.
file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../python/cortex_m_nn/version.py" _cmnn_version_line
     REGEX "^__version__ = ")
string(REGEX REPLACE "^__version__ = \"([0-9.]+)\".*" "\\1" PACKAGE_VERSION
       "${_cmnn_version_line}")
set(PACKAGE_VERSION_COMPATIBLE FALSE)
set(PACKAGE_VERSION_EXACT FALSE)
if(NOT PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
else()
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" _cmnn_have "${PACKAGE_VERSION}")
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" _cmnn_want "${PACKAGE_FIND_VERSION}")
  if(_cmnn_have VERSION_EQUAL _cmnn_want AND NOT PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION)
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
  if(PACKAGE_VERSION VERSION_EQUAL PACKAGE_FIND_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
