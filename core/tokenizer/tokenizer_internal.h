#pragma once
// Helpers shared by the tokenizer implementations; not part of the public interface.

#include <string>
#include <string_view>

namespace spillway::tokenizer_detail {

// The byte a "<0xAB>" piece stands for (0..255), or -1 when `text` is not such a piece.
int parseByteToken(std::string_view text);
// "<0xAB>" for byte 0xAB: uppercase hex, as SentencePiece and GGUF vocabularies spell it.
std::string byteTokenText(unsigned char byte);

inline constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

}  // namespace spillway::tokenizer_detail
