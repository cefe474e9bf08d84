// The shared secret of the coordinator: a token read from a file that only its owner may read.
// read_token_file() refuses (std::runtime_error naming the file and the fix) a file that is not a
// regular file owned by the current user with no group/other permission bits, or whose content is
// not 16..1024 printable ASCII characters (surrounding whitespace ignored).
// create_token_file() makes a new one (mode 0600, 256 random bits as hex) and never overwrites.
#pragma once
#include <string>
#include <string_view>

namespace linea::coordinator {

std::string read_token_file(const std::string& path);
std::string create_token_file(const std::string& path);
// Compares in time independent of where the strings differ.
bool tokens_equal(std::string_view a, std::string_view b);

}  // namespace linea::coordinator
