# Writes OUTPUT (.cpp) defining `extern const unsigned char SYMBOL[]` and SYMBOL_size with
# the bytes of INPUT. Aligned to 8: cuModuleLoadData reads the fatbin header in place.
file(READ ${INPUT} hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR size "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){32})" "\\1\n" body "${body}")
file(WRITE ${OUTPUT}
"// Generated from ${INPUT}; do not edit.\n#include <cstddef>\n"
"namespace lockstep::hashing {\n"
"alignas(8) extern const unsigned char ${SYMBOL}[] = {\n${body}\n};\n"
"extern const size_t ${SYMBOL}_size = ${size};\n"
"}  // namespace lockstep::hashing\n")
