# Finds CUPTI for measured mode and defines the target wavecast::cupti and
# WAVECAST_HAVE_CUPTI. Two places users have it: a CUDA toolkit, or the
# nvidia-cuda-cupti wheel that PyPI's CUDA torch brings into a Python
# environment (nvidia/cu13/ in CUDA 13 wheels, nvidia/cuda_cupti/ in CUDA 12
# ones), so measured mode builds where only `pip install torch` was run.
#
# wavecast::cupti carries CUPTI's headers and the library's path
# (WAVECAST_CUPTI_LIBRARY), not a link: wavecast_cupti loads the library when
# measured mode first needs it, so the worker also runs where CUDA is absent.
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND AND TARGET CUDA::cupti)
  add_library(wavecast::cupti INTERFACE IMPORTED)
  set_target_properties(wavecast::cupti PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES
      "${CUDAToolkit_INCLUDE_DIRS};$<TARGET_PROPERTY:CUDA::cupti,INTERFACE_INCLUDE_DIRECTORIES>"
    INTERFACE_COMPILE_DEFINITIONS "WAVECAST_CUPTI_LIBRARY=\"$<TARGET_FILE:CUDA::cupti>\""
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS}")
  set(WAVECAST_HAVE_CUPTI ON)
  message(STATUS "wavecast: CUPTI from the CUDA toolkit ${CUDAToolkit_VERSION}")
  return()
endif()

file(GLOB _wavecast_cupti_headers
     "${WAVECAST_PYTHON_ENV}/lib/python3*/site-packages/nvidia/*/include/cupti.h")
set(WAVECAST_HAVE_CUPTI OFF)
foreach(_header IN LISTS _wavecast_cupti_headers)
  get_filename_component(_include "${_header}" DIRECTORY)
  get_filename_component(_package "${_include}" DIRECTORY)
  file(GLOB _library "${_package}/lib/libcupti.so.*")
  if(NOT _library)
    continue()
  endif()
  list(GET _library 0 _library)
  # cupti.h includes cuda.h: in the same folder (CUDA 13) or the runtime wheel's (CUDA 12).
  file(GLOB _cuda_headers "${_package}/../*/include/cuda.h")
  set(_includes "${_include}")
  foreach(_cuda IN LISTS _cuda_headers)
    get_filename_component(_dir "${_cuda}" DIRECTORY)
    list(APPEND _includes "${_dir}")
  endforeach()
  # cuda.h's headers include crt/host_defines.h, which only the CUDA compiler's
  # wheel has; torch's triton dependency carries a copy, searched last.
  if(NOT EXISTS "${_include}/crt/host_defines.h")
    file(GLOB _crt "${_package}/../*/include/crt/host_defines.h"
         "${_package}/../../triton/backends/nvidia/include/crt/host_defines.h")
    if(NOT _crt)
      message(STATUS "wavecast: the nvidia-cuda-cupti wheel in ${WAVECAST_PYTHON_ENV} lacks "
                     "crt/host_defines.h (from nvidia-cuda-crt or triton); measured mode disabled")
      break()
    endif()
    list(GET _crt 0 _crt)
    get_filename_component(_crt "${_crt}" DIRECTORY)
    get_filename_component(_crt "${_crt}" DIRECTORY)
    list(APPEND _includes "${_crt}")
  endif()
  list(REMOVE_DUPLICATES _includes)
  add_library(wavecast::cupti INTERFACE IMPORTED)
  set_target_properties(wavecast::cupti PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_includes}"
    INTERFACE_COMPILE_DEFINITIONS "WAVECAST_CUPTI_LIBRARY=\"${_library}\""
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS}")
  set(WAVECAST_HAVE_CUPTI ON)
  message(STATUS "wavecast: CUPTI from the nvidia-cuda-cupti wheel (${_library})")
  break()
endforeach()
if(NOT WAVECAST_HAVE_CUPTI)
  message(STATUS "wavecast: no CUPTI (neither a CUDA toolkit nor the nvidia-cuda-cupti wheel in "
                 "${WAVECAST_PYTHON_ENV}); measured mode disabled")
endif()
