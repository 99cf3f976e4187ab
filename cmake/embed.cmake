# Turns a text file into a C string constant: cmake -DIN=file -DOUT=header -DNAME=symbol
# -P embed.cmake. Used for the HTML report's script and style.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}.tmp" "/* generated from ${IN} by cmake/embed.cmake */\nstatic const char ${NAME}[] = {${bytes} 0x00};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
