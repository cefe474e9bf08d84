// The parts of parquet's metadata (parquet-format's parquet.thrift) that linea's reader uses,
// decoded from Thrift's compact protocol (thrift_compact.h); every other field is skipped.
//   file: "PAR1", column chunks, FileMetaData (compact Thrift), its length (4 bytes LE), "PAR1";
//   each column chunk: [dictionary page] data pages..., each a PageHeader followed by its bytes.
// The enum values are parquet.thrift's.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/thrift_compact.h"

namespace linea::data::parquet {

enum PhysicalType : int32_t {
  kBoolean = 0,
  kInt32 = 1,
  kInt64 = 2,
  kInt96 = 3,
  kFloat = 4,
  kDouble = 5,
  kByteArray = 6,
  kFixedLenByteArray = 7
};
enum Repetition : int32_t { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum Encoding : int32_t {
  kPlain = 0,
  kPlainDictionary = 2,
  kRle = 3,
  kBitPacked = 4,
  kDeltaBinaryPacked = 5,
  kDeltaLengthByteArray = 6,
  kDeltaByteArray = 7,
  kRleDictionary = 8,
  kByteStreamSplit = 9
};
enum Codec : int32_t {
  kUncompressed = 0,
  kSnappy = 1,
  kGzip = 2,
  kLzo = 3,
  kBrotli = 4,
  kLz4 = 5,
  kZstd = 6,
  kLz4Raw = 7
};
enum PageType : int32_t { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };

std::string physical_type_name(int32_t type);
std::string encoding_name(int32_t encoding);
std::string codec_name(int32_t codec);

struct SchemaElement {
  std::optional<int32_t> type;  // absent for groups
  std::optional<int32_t> repetition;
  std::string name;
  int32_t num_children = 0;
};

struct ColumnMetaData {
  int32_t type = 0;
  std::vector<std::string> path;  // path_in_schema
  int32_t codec = 0;
  int64_t num_values = 0;
  int64_t total_uncompressed_size = 0;
  int64_t total_compressed_size = 0;
  int64_t data_page_offset = 0;
  std::optional<int64_t> dictionary_page_offset;
};

struct ColumnChunk {
  std::string file_path;  // non-empty: the chunk lives in another file
  std::optional<ColumnMetaData> meta;
  bool encrypted = false;
};

struct RowGroup {
  std::vector<ColumnChunk> columns;
  int64_t num_rows = 0;
  int64_t total_byte_size = 0;
};

struct FileMetaData {
  int32_t version = 0;
  std::vector<SchemaElement> schema;  // depth-first, schema[0] the root
  int64_t num_rows = 0;
  std::vector<RowGroup> row_groups;
  std::string created_by;
  bool encrypted = false;  // encryption_algorithm present (plaintext footer of an encrypted file)
};

struct PageHeader {
  int32_t type = -1;
  int32_t uncompressed_size = -1;
  int32_t compressed_size = -1;
  int32_t num_values = -1;        // data pages v1/v2 and dictionary pages
  int32_t encoding = -1;          // of the values
  int32_t level_encoding = kRle;  // v1: the definition levels' encoding
  int32_t def_levels_bytes = 0;   // v2
  int32_t rep_levels_bytes = 0;   // v2
  bool is_compressed = true;      // v2
  bool has_type_header = false;   // the header for `type` was present
};

// Throw std::runtime_error (from the Thrift reader) on malformed input.
FileMetaData read_file_metadata(ThriftCompactReader& r);
PageHeader read_page_header(ThriftCompactReader& r);

}  // namespace linea::data::parquet
