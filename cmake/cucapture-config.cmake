# The CMake package of libcucapture 1.4.0:
#     find_package(cucapture 1.3 CONFIG REQUIRED)
#     target_link_libraries(app PRIVATE cucapture::cucapture)
# The target carries libcucapture's headers and those of CUDA (cuda.h and
# cudaTypedefs.h, 12.3 or newer), found through CMake's CUDAToolkit, else
# where they were when the library was built.  It links libcucapture
# alone: the library loads the CUDA driver at run time.
if(TARGET cucapture::cucapture)
  return()
endif()

set(_cucapture_cuda_include "")
if(NOT EXISTS "/usr/include/cuda.h")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND EXISTS "${CUDAToolkit_INCLUDE_DIRS}/cudaTypedefs.h")
    set(_cucapture_cuda_include "${CUDAToolkit_INCLUDE_DIRS}")
  elseif(EXISTS "/usr/local/cuda/include/cuda.h")
    set(_cucapture_cuda_include "/usr/local/cuda/include")
  else()
    set(cucapture_FOUND FALSE)
    set(cucapture_NOT_FOUND_MESSAGE
        "libcucapture needs the CUDA headers (cuda.h and cudaTypedefs.h, CUDA 12.3 or newer): CUDAToolkit was not found and /usr/local/cuda/include/cuda.h does not exist; install the CUDA toolkit or nvidia-cuda-dev, or set CUDAToolkit_ROOT")
    return()
  endif()
endif()

add_library(cucapture::cucapture SHARED IMPORTED)
set_target_properties(cucapture::cucapture PROPERTIES
  IMPORTED_LOCATION "/usr/local/lib/libcucapture.so"
  IMPORTED_SONAME "libcucapture.so.1"
  INTERFACE_INCLUDE_DIRECTORIES "/usr/local/include"
  INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${_cucapture_cuda_include}")
if(_cucapture_cuda_include)
  set_property(TARGET cucapture::cucapture APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${_cucapture_cuda_include}")
endif()
unset(_cucapture_cuda_include)
