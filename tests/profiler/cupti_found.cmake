# Measured mode builds against the CUPTI that PyPI's CUDA torch brings (the
# nvidia-cuda-cupti wheel) when no CUDA toolkit is installed: where the Python
# environment holds the wheel, configuring must have found it. Run by ctest as
# cmake -DHAVE_CUPTI=... -DPYTHON_ENV=... -P cupti_found.cmake.
file(GLOB headers "${PYTHON_ENV}/lib/python3*/site-packages/nvidia/*/include/cupti.h")
if(NOT headers)
  message("SKIP: ${PYTHON_ENV} has no nvidia-cuda-cupti wheel (a CPU torch or no venv), so there is no CUPTI to find there")
  return()
endif()
if(NOT HAVE_CUPTI)
  message(FATAL_ERROR "${headers} is in the Python environment, but configuring did not find "
                      "CUPTI there: measured mode would be built without it (cmake/Cupti.cmake)")
endif()
message("CUPTI found as configured: ${headers}")
