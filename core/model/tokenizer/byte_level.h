#pragma once
// GPT-2's reversible byte <-> character map: every byte becomes a printable
// character (printable Latin-1 bytes map to themselves, the rest to
// U+0100..), so byte-level BPE vocabularies are valid text ("Ġ" = space).
#include <cstdint>
#include <optional>
#include <string>

namespace kvscope {

// Maps every byte of raw to its character (UTF-8 encoded).
std::string bytesToByteLevel(const std::string& raw);
// The byte a character stands for, if it is one of the 256 mapped characters.
std::optional<uint8_t> byteLevelCharToByte(char32_t c);
// Maps a byte-level string back to raw bytes; nullopt if any character is
// not in the map (HF then keeps the token's own UTF-8 bytes).
std::optional<std::string> byteLevelToBytes(const std::string& text);

}  // namespace kvscope
