// Decompression of parquet pages by codec: UNCOMPRESSED, SNAPPY (libsnappy, raw format), GZIP
// (zlib; a gzip or zlib stream, several members allowed) and ZSTD (libzstd, one or more frames).
// Every page says how many bytes it holds uncompressed; a stream that yields another count is
// corrupt. Output is allocated as it is produced (a header that claims more costs nothing), and at
// most `expected` bytes are ever written. Other codecs (LZO, BROTLI, LZ4, LZ4_RAW) are refused.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace linea::data::parquet {

bool codec_supported(int32_t codec);

// The page's bytes uncompressed: `in` itself for UNCOMPRESSED (then in.size() must be `expected`),
// else `buffer`, filled. Throws std::runtime_error saying what is wrong (the caller names the file).
std::span<const uint8_t> decompress(int32_t codec, std::span<const uint8_t> in, size_t expected,
                                    std::vector<uint8_t>& buffer);

}  // namespace linea::data::parquet
