#include "data/parquet_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <span>
#include <stdexcept>

#include "data/parquet_codecs.h"
#include "data/rle_bit_packed_decoder.h"

namespace linea::data {

using namespace parquet;

namespace {

constexpr size_t kMagicBytes = 4;
constexpr int kMaxSchemaDepth = 64;
// Writers cut pages at about 1 MB or 20000 rows; a page header claiming more values than this is
// refused rather than given the memory (a corrupt count would ask for gigabytes).
constexpr int64_t kMaxPageValues = int64_t{1} << 26;

uint32_t load_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

[[noreturn]] void bad(const std::string& what) { throw std::runtime_error(what); }

// PLAIN values: BYTE_ARRAY as a 4-byte little-endian length and the bytes; numbers fixed-width LE.
void decode_plain(int32_t /*type: BYTE_ARRAY*/, std::span<const uint8_t> data, int64_t count,
                  std::vector<std::string_view>& out) {
  size_t pos = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (data.size() - pos < 4) bad("PLAIN strings end after " + std::to_string(i) + " of " + std::to_string(count));
    const uint32_t n = load_u32(data.data() + pos);
    pos += 4;
    if (data.size() - pos < n)
      bad("PLAIN string " + std::to_string(i) + " of " + std::to_string(n) + " bytes is cut short");
    out.emplace_back(reinterpret_cast<const char*>(data.data() + pos), n);
    pos += n;
  }
}

void decode_plain(int32_t type, std::span<const uint8_t> data, int64_t count, std::vector<double>& out) {
  const size_t width = type == kInt32 || type == kFloat ? 4 : 8;
  if (static_cast<uint64_t>(count) > data.size() / width) {
    bad("PLAIN " + physical_type_name(type) + " values: " + std::to_string(count) + " do not fit in " +
        std::to_string(data.size()) + " bytes");
  }
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t* p = data.data() + i * width;
    switch (type) {
      case kInt32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        out.push_back(v);
        break;
      }
      case kInt64: {
        int64_t v;
        std::memcpy(&v, p, 8);
        out.push_back(static_cast<double>(v));
        break;
      }
      case kFloat: {
        float v;
        std::memcpy(&v, p, 4);
        out.push_back(v);
        break;
      }
      default: {
        double v;
        std::memcpy(&v, p, 8);
        out.push_back(v);
      }
    }
  }
}

void append(StringColumn& c, std::string_view v) {
  c.bytes.append(v);
  c.ends.push_back(c.bytes.size());
  c.valid.push_back(1);
}
void append_null(StringColumn& c) {
  c.ends.push_back(c.bytes.size());
  c.valid.push_back(0);
}
void append(NumberColumn& c, double v) {
  c.values.push_back(v);
  c.valid.push_back(1);
}
void append_null(NumberColumn& c) {
  c.values.push_back(0);
  c.valid.push_back(0);
}

}  // namespace

ParquetFile::ParquetFile(std::filesystem::path path) : path_(std::move(path)) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(std::string("cannot open (") + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(std::string("cannot stat (") + std::strerror(errno) + ")");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ < 2 * kMagicBytes + 4) {
    ::close(fd);
    fail("not a parquet file: " + std::to_string(size_) + " bytes, too short for the PAR1 header and footer");
  }
  void* map = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) fail(std::string("mmap failed (") + std::strerror(errno) + ")");
  map_ = static_cast<const uint8_t*>(map);
  try {
    const uint8_t* tail = map_ + size_ - kMagicBytes;
    if (std::memcmp(tail, "PARE", 4) == 0) fail("unsupported: the footer is encrypted (parquet modular encryption)");
    if (std::memcmp(map_, "PAR1", 4) != 0 || std::memcmp(tail, "PAR1", 4) != 0) {
      fail("not a parquet file: it does not start and end with \"PAR1\"");
    }
    const uint32_t footer = load_u32(map_ + size_ - kMagicBytes - 4);
    if (footer > size_ - 2 * kMagicBytes - 4) {
      fail("corrupt footer: its length " + std::to_string(footer) + " exceeds the file");
    }
    footer_start_ = size_ - kMagicBytes - 4 - footer;
    ThriftCompactReader r(map_ + footer_start_, footer);
    try {
      meta_ = read_file_metadata(r);
    } catch (const std::exception& e) {
      fail(std::string("corrupt footer (FileMetaData): ") + e.what());
    }
    if (meta_.encrypted) fail("unsupported: the file is encrypted (parquet modular encryption)");
    read_schema();
    for (size_t g = 0; g < meta_.row_groups.size(); ++g) {
      const RowGroup& rg = meta_.row_groups[g];
      if (rg.columns.size() != leaves_.size()) {
        fail("row group " + std::to_string(g) + ": " + std::to_string(rg.columns.size()) +
             " column chunks, the schema has " + std::to_string(leaves_.size()) + " columns");
      }
      if (rg.num_rows < 0 || rg.num_rows > INT32_MAX) {
        fail("row group " + std::to_string(g) + ": row count " + std::to_string(rg.num_rows) + " out of range");
      }
    }
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(map_), size_);
    throw;
  }
}

ParquetFile::~ParquetFile() { ::munmap(const_cast<uint8_t*>(map_), size_); }

void ParquetFile::fail(const std::string& what) const {
  throw std::runtime_error("parquet " + path_.string() + ": " + what);
}

// Schema elements are stored depth-first; a group's children follow it. Leaves are the elements
// without children, numbered in that order, which is the order of the column chunks.
void ParquetFile::read_schema() {
  const auto& s = meta_.schema;
  if (s.empty()) fail("corrupt footer: empty schema");
  size_t next = 1;
  struct Walker {
    ParquetFile& file;
    const std::vector<SchemaElement>& s;
    size_t& next;
    void walk(int children, int depth, const std::string& prefix, int max_def, bool repeated) {
      if (depth > kMaxSchemaDepth) file.fail("corrupt schema: nested deeper than " + std::to_string(kMaxSchemaDepth));
      for (int c = 0; c < children; ++c) {
        if (next >= s.size()) file.fail("corrupt schema: a group has more children than the schema has elements");
        const SchemaElement& e = s[next++];
        const std::string name = prefix.empty() ? e.name : prefix + "." + e.name;
        const int32_t rep = e.repetition.value_or(kRequired);
        const int def = max_def + (rep == kOptional ? 1 : 0);
        const bool rep_here = repeated || rep == kRepeated;
        if (e.num_children < 0) file.fail("corrupt schema: element " + name + " has a negative child count");
        if (e.num_children > 0) {
          walk(e.num_children, depth + 1, name, def, rep_here);
        } else {
          if (!e.type) file.fail("corrupt schema: leaf " + name + " has no physical type");
          file.leaves_.push_back({name, *e.type, def, depth == 1 && !rep_here});
        }
      }
    }
  } walker{*this, s, next};
  walker.walk(s[0].num_children, 1, "", 0, false);
  if (next != s.size()) fail("corrupt schema: " + std::to_string(s.size() - next) + " elements outside the tree");
}

std::vector<std::string> ParquetFile::column_names() const {
  std::vector<std::string> names;
  for (size_t i = 1; i < meta_.schema.size(); ++i) {
    // Top-level elements: walk children counts (read_schema checked the tree).
    names.push_back(meta_.schema[i].name);
    int skip = meta_.schema[i].num_children;
    while (skip > 0) {
      ++i;
      skip += meta_.schema[i].num_children - 1;
    }
  }
  return names;
}

int ParquetFile::column(const std::string& name, std::initializer_list<int32_t> types, const char* kind) const {
  for (size_t i = 0; i < leaves_.size(); ++i) {
    const Leaf& leaf = leaves_[i];
    const bool inside =
        leaf.name.size() > name.size() && leaf.name.compare(0, name.size(), name) == 0 && leaf.name[name.size()] == '.';
    if (inside) fail("column \"" + name + "\" is nested (a group); linea reads top-level columns");
    if (leaf.name != name) continue;
    if (!leaf.flat) fail("column \"" + name + "\" is repeated (a list); linea reads one value per row");
    for (int32_t t : types) {
      if (leaf.type == t) return static_cast<int>(i);
    }
    fail("column \"" + name + "\" has physical type " + physical_type_name(leaf.type) + "; expected " + kind);
  }
  std::string names;
  for (const auto& n : column_names()) names += (names.empty() ? "" : ", ") + n;
  fail("no column \"" + name + "\" (the file has: " + names + ")");
}

int ParquetFile::string_column(const std::string& name) const {
  return column(name, {kByteArray}, "BYTE_ARRAY (strings)");
}

int ParquetFile::number_column(const std::string& name) const {
  return column(name, {kInt32, kInt64, kFloat, kDouble}, "INT32, INT64, FLOAT or DOUBLE");
}

void ParquetFile::read_strings(int group, int column, StringColumn& out) const {
  out = StringColumn{};
  read_chunk<std::string_view>(group, column, out);
}

void ParquetFile::read_numbers(int group, int column, NumberColumn& out) const {
  out = NumberColumn{};
  read_chunk<double>(group, column, out);
}

// The pages of one column chunk: an optional dictionary page, then data pages until the chunk's
// value count is reached. Each data page holds num_values entries (values and nulls): definition
// levels say which are present (level = max_definition), and the present ones are PLAIN values or
// dictionary indices (a bit-width byte, then RLE/bit-packed indices).
template <class Value, class Column>
void ParquetFile::read_chunk(int group, int column, Column& out) const {
  const std::string where = "row group " + std::to_string(group) + ", column \"" +
                            (column >= 0 && column < static_cast<int>(leaves_.size()) ? leaves_[column].name : "?") +
                            "\": ";
  if (group < 0 || group >= num_row_groups() || column < 0 || column >= static_cast<int>(leaves_.size())) {
    fail(where + "no such row group or column");
  }
  const Leaf& leaf = leaves_[column];
  const RowGroup& rg = meta_.row_groups[group];
  const ColumnChunk& chunk = rg.columns[column];
  try {
    if (chunk.encrypted) bad("unsupported: the column chunk is encrypted");
    if (!chunk.file_path.empty()) bad("unsupported: the column chunk is in another file (" + chunk.file_path + ")");
    if (!chunk.meta) bad("corrupt: the column chunk has no metadata");
    const ColumnMetaData& m = *chunk.meta;
    if (m.type != leaf.type) bad("corrupt: chunk type " + physical_type_name(m.type) + " differs from the schema's");
    if (!codec_supported(m.codec)) {
      bad("unsupported compression codec " + codec_name(m.codec) +
          " (linea reads UNCOMPRESSED, SNAPPY, GZIP and ZSTD)");
    }
    if (m.num_values != rg.num_rows) {
      bad("corrupt: " + std::to_string(m.num_values) + " values in a flat column of " + std::to_string(rg.num_rows) +
          " rows");
    }
    if (rg.num_rows == 0) return;  // writers may leave an empty chunk's offsets unset
    int64_t start = m.data_page_offset;
    if (m.dictionary_page_offset && *m.dictionary_page_offset > 0 && *m.dictionary_page_offset < start) {
      start = *m.dictionary_page_offset;
    }
    if (start < static_cast<int64_t>(kMagicBytes) || m.total_compressed_size <= 0 ||
        m.total_compressed_size > static_cast<int64_t>(footer_start_) - start) {
      bad("corrupt: the column chunk's bytes [" + std::to_string(start) + ", +" +
          std::to_string(m.total_compressed_size) + ") are not within the file's data");
    }
    const uint8_t* const chunk_end = map_ + start + m.total_compressed_size;
    const uint8_t* p = map_ + start;

    std::vector<Value> dictionary;
    bool have_dictionary = false;
    std::vector<uint8_t> dictionary_bytes, page_bytes;  // decompressed dictionary / data page
    std::vector<uint32_t> levels, indices;
    std::vector<Value> values;
    int64_t read = 0;
    while (read < m.num_values) {
      if (p == chunk_end) {
        bad("corrupt: the column chunk ends after " + std::to_string(read) + " of " + std::to_string(m.num_values) +
            " values");
      }
      ThriftCompactReader r(p, static_cast<size_t>(chunk_end - p));
      PageHeader h;
      try {
        h = read_page_header(r);
      } catch (const std::exception& e) {
        bad(std::string("corrupt page header: ") + e.what());
      }
      p += r.offset();
      if (h.compressed_size < 0 || h.compressed_size > chunk_end - p || h.uncompressed_size < 0) {
        bad("corrupt page header: page sizes " + std::to_string(h.compressed_size) + " / " +
            std::to_string(h.uncompressed_size) + " do not fit the column chunk");
      }
      const std::span<const uint8_t> body(p, static_cast<size_t>(h.compressed_size));
      p += h.compressed_size;
      if (h.type == kIndexPage) continue;
      if (h.type != kDataPage && h.type != kDictionaryPage && h.type != kDataPageV2) {
        bad("unsupported page type " + std::to_string(h.type));
      }
      if (!h.has_type_header || h.num_values < 0) bad("corrupt page header: no header for its page type");

      if (h.type == kDictionaryPage) {
        if (have_dictionary || read > 0) bad("corrupt: a dictionary page after the first page");
        if (h.encoding != kPlain && h.encoding != kPlainDictionary) {
          bad("unsupported dictionary page encoding " + encoding_name(h.encoding));
        }
        // The dictionary's strings point into dictionary_bytes or the mapped file: both outlive the chunk.
        const auto plain = decompress(m.codec, body, static_cast<size_t>(h.uncompressed_size), dictionary_bytes);
        decode_plain(leaf.type, plain, h.num_values, dictionary);
        have_dictionary = true;
        continue;
      }

      // A data page: [definition levels] values.
      const int64_t n = h.num_values;
      if (n > kMaxPageValues) {
        bad("unsupported: a page of " + std::to_string(n) + " values (linea reads pages of up to " +
            std::to_string(kMaxPageValues) + ")");
      }
      if (n > m.num_values - read) {
        bad("corrupt: a page of " + std::to_string(n) + " values after " + std::to_string(read) + " of " +
            std::to_string(m.num_values));
      }
      std::span<const uint8_t> level_bytes, value_bytes;
      if (h.type == kDataPage) {
        const auto page = decompress(m.codec, body, static_cast<size_t>(h.uncompressed_size), page_bytes);
        value_bytes = page;
        if (leaf.max_definition > 0) {
          if (h.level_encoding != kRle) {
            bad("unsupported definition level encoding " + encoding_name(h.level_encoding) + " (linea reads RLE)");
          }
          if (page.size() < 4 || load_u32(page.data()) > page.size() - 4) bad("corrupt: definition levels cut short");
          level_bytes = page.subspan(4, load_u32(page.data()));
          value_bytes = page.subspan(4 + level_bytes.size());
        }
      } else {
        if (h.rep_levels_bytes != 0) bad("corrupt: repetition levels in a flat column");
        if (h.def_levels_bytes < 0 || h.def_levels_bytes > h.compressed_size ||
            h.def_levels_bytes > h.uncompressed_size) {
          bad("corrupt page header: definition levels of " + std::to_string(h.def_levels_bytes) + " bytes");
        }
        if (leaf.max_definition == 0 && h.def_levels_bytes != 0) bad("corrupt: definition levels in a required column");
        level_bytes = body.first(static_cast<size_t>(h.def_levels_bytes));
        const auto rest = body.subspan(level_bytes.size());
        const auto rest_size = static_cast<size_t>(h.uncompressed_size - h.def_levels_bytes);
        if (h.is_compressed) {
          value_bytes = decompress(m.codec, rest, rest_size, page_bytes);
        } else {
          if (rest.size() != rest_size) bad("corrupt page header: uncompressed page sizes do not add up");
          value_bytes = rest;
        }
      }

      // Which entries are present.
      int64_t present = n;
      if (leaf.max_definition > 0) {
        levels.resize(static_cast<size_t>(n));
        RleBitPackedDecoder(level_bytes.data(), level_bytes.size(), 1).decode(levels.data(), n);
        present = 0;
        for (uint32_t l : levels) {
          if (l > static_cast<uint32_t>(leaf.max_definition)) bad("corrupt: definition level " + std::to_string(l));
          present += l == static_cast<uint32_t>(leaf.max_definition);
        }
      }
      values.clear();
      if (h.encoding == kPlain) {
        decode_plain(leaf.type, value_bytes, present, values);
      } else if (h.encoding == kRleDictionary || h.encoding == kPlainDictionary) {
        if (!have_dictionary) bad("corrupt: dictionary-encoded values without a dictionary page");
        if (present > 0) {
          if (value_bytes.empty()) bad("corrupt: dictionary indices without their bit width");
          indices.resize(static_cast<size_t>(present));
          RleBitPackedDecoder(value_bytes.data() + 1, value_bytes.size() - 1, value_bytes[0])
              .decode(indices.data(), present);
          for (uint32_t i : indices) {
            if (i >= dictionary.size()) {
              bad("corrupt: dictionary index " + std::to_string(i) + " of a dictionary of " +
                  std::to_string(dictionary.size()));
            }
            values.push_back(dictionary[i]);
          }
        }
      } else {
        bad("unsupported encoding " + encoding_name(h.encoding) +
            " (linea reads PLAIN, PLAIN_DICTIONARY and RLE_DICTIONARY)");
      }
      size_t next = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (leaf.max_definition == 0 || levels[static_cast<size_t>(i)] == static_cast<uint32_t>(leaf.max_definition)) {
          append(out, values[next++]);
        } else {
          append_null(out);
        }
      }
      read += n;
    }
  } catch (const std::exception& e) {
    fail(where + e.what());
  }
}

}  // namespace linea::data
