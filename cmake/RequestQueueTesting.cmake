# Helpers to register tests that run against the HTTP fixture server.
#
#   rq_add_fixture_test(<name>
#     COMMAND <target-or-program> [<arg>...]     "{base}" in an argument becomes http://127.0.0.1:<port>,
#                                                "{port}" the port
#     [EXPECT <regex>...]       each must match the program's standard output (Python re, MULTILINE)
#     [REJECT <regex>...]       none may match it
#     [SERVER_COUNT <regex>=<n>...]  afterwards, exactly <n> requests logged by the server have a
#                                    path (with query) matching <regex>
#     [EXIT_CODE <n>]           expected exit status (default 0)
#     [TIMEOUT <seconds>]       (default 120)
#     [LABELS <label>...])
#
# Each test starts its own fixture server (Tests/c/with_fixture.py does it), so tests are independent
# and can run in parallel (ctest -j). The exit status is always checked, unlike CTest's own
# PASS_REGULAR_EXPRESSION, which ignores it. Regexes must not contain ';' (CMake list separator).

set(RQ_FIXTURE_WRAPPER "${PROJECT_SOURCE_DIR}/Tests/c/with_fixture.py")

function(rq_add_fixture_test name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "EXIT_CODE;TIMEOUT" "COMMAND;EXPECT;REJECT;SERVER_COUNT;LABELS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "rq_add_fixture_test(${name}): unexpected arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_COMMAND)
    message(FATAL_ERROR "rq_add_fixture_test(${name}): COMMAND is required")
  endif()

  list(POP_FRONT arg_COMMAND program)
  if(TARGET "${program}")
    set(program "$<TARGET_FILE:${program}>")
  endif()

  set(wrapper_args --server "${RQ_FIXTURE_SERVER}")
  foreach(regex IN LISTS arg_EXPECT)
    list(APPEND wrapper_args --expect "${regex}")
  endforeach()
  foreach(regex IN LISTS arg_REJECT)
    list(APPEND wrapper_args --reject "${regex}")
  endforeach()
  foreach(count IN LISTS arg_SERVER_COUNT)
    list(APPEND wrapper_args --server-count "${count}")
  endforeach()
  if(DEFINED arg_EXIT_CODE)
    list(APPEND wrapper_args --exit-code "${arg_EXIT_CODE}")
  endif()

  add_test(NAME "${name}"
    COMMAND "${Python3_EXECUTABLE}" "${RQ_FIXTURE_WRAPPER}" ${wrapper_args} -- "${program}" ${arg_COMMAND})
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 120)
  endif()
  set_tests_properties("${name}" PROPERTIES TIMEOUT "${arg_TIMEOUT}" LABELS "fixture;${arg_LABELS}")
endfunction()

