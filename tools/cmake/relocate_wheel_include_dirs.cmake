# Injected with -DCMAKE_PROJECT_INCLUDE=... by tools/build_msgs.sh when vtm_msgs is built against the ROS 2
# wheels from PyPI (never needed in a regular ROS 2 installation, where colcon builds vtm_msgs unchanged).
#
# Those wheels export CMake targets whose INTERFACE_INCLUDE_DIRECTORIES name directories of the machine that built
# them (for example the Python headers under /opt/python/...). CMake refuses to generate a build that uses a target
# with a non-existent include directory. At the end of configuration this script rewrites such entries: a Python
# header directory becomes this interpreter's header directory (VTM_PYTHON_INCLUDE_DIR), anything else that does
# not exist is dropped.

if(NOT DEFINED VTM_PYTHON_INCLUDE_DIR)
  message(FATAL_ERROR "relocate_wheel_include_dirs.cmake needs -DVTM_PYTHON_INCLUDE_DIR=<python include dir>")
endif()

function(vtm_relocate_imported_include_dirs)
  get_property(targets DIRECTORY "${CMAKE_SOURCE_DIR}" PROPERTY IMPORTED_TARGETS)
  set(changed 0)
  foreach(target IN LISTS targets)
    get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT dirs)
      continue()
    endif()
    set(fixed "")
    set(target_changed FALSE)
    foreach(dir IN LISTS dirs)
      if(dir MATCHES "^\\$<" OR EXISTS "${dir}")
        list(APPEND fixed "${dir}")
      elseif(dir MATCHES "/include/python3\\.[0-9]+$")
        list(APPEND fixed "${VTM_PYTHON_INCLUDE_DIR}")
        set(target_changed TRUE)
      else()
        set(target_changed TRUE)
      endif()
    endforeach()
    if(target_changed)
      list(REMOVE_DUPLICATES fixed)
      set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${fixed}")
      math(EXPR changed "${changed} + 1")
    endif()
  endforeach()
  message(STATUS "vtm: relocated include directories of ${changed} imported wheel targets")
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL vtm_relocate_imported_include_dirs)
