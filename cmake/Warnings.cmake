# cifar_warnings(<target>): the project's warning set, errors in CI (CIFAR_WERROR=ON).
option(CIFAR_WERROR "Treat warnings as errors" OFF)
function(cifar_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
  if(CIFAR_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
