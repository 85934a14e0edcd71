# Installs the build tree into a fresh prefix, then configures, builds and runs
# examples/consumer against it with find_package(compass).
# cmake -DBUILD_DIR=<build tree> -DSOURCE_DIR=<source tree> -DWORK_DIR=<scratch> -P consumer_test.cmake
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "${v} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f lib/cmake/compass/compassConfig.cmake lib/cmake/compass/compassTargets.cmake
          include/compass/plan/layer_plan.hpp bin/compass)
  if(NOT EXISTS ${prefix}/${f})
    # Some platforms use lib64; accept it for the library files.
    string(REPLACE "lib/" "lib64/" alt ${f})
    if(NOT EXISTS ${prefix}/${alt})
      message(FATAL_ERROR "not installed: ${f}")
    endif()
  endif()
endforeach()
step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer -B ${WORK_DIR}/build -G Ninja
     -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
step(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step(${WORK_DIR}/build/compass_consumer)
if(NOT step_output MATCHES "compass over megatron [0-9]+\\.[0-9]+x \\(10 TP operators\\)")
  message(FATAL_ERROR "unexpected consumer output: ${step_output}")
endif()
message(STATUS "consumer: ${step_output}")
