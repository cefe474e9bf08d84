#include "data/parquet_metadata.h"

namespace linea::data::parquet {

namespace {

using Field = ThriftCompactReader::Field;

// Calls on_field(field) for every field of the struct at the reader's position; fields it does not
// take (returns false) are skipped.
template <class OnField>
void read_struct(ThriftCompactReader& r, OnField&& on_field) {
  r.begin_struct();
  Field f;
  while (r.next_field(f)) {
    if (!on_field(f)) r.skip(f.type);
  }
  r.end_struct();
}

template <class OnElement>
void read_list(ThriftCompactReader& r, const Field& f, ThriftType element, OnElement&& on_element) {
  const auto list = r.list(f);
  if (list.element != element) {
    for (int64_t i = 0; i < list.size; ++i) r.skip(list.element);  // not what parquet.thrift says: ignore
    return;
  }
  for (int64_t i = 0; i < list.size; ++i) on_element(list);
}

SchemaElement read_schema_element(ThriftCompactReader& r) {
  SchemaElement e;
  read_struct(r, [&](const Field& f) {
    switch (f.id) {
      case 1: e.type = r.i32(f); return true;
      case 3: e.repetition = r.i32(f); return true;
      case 4: e.name = r.string(f); return true;
      case 5: e.num_children = r.i32(f); return true;
      default: return false;
    }
  });
  return e;
}

ColumnMetaData read_column_metadata(ThriftCompactReader& r) {
  ColumnMetaData m;
  read_struct(r, [&](const Field& f) {
    switch (f.id) {
      case 1: m.type = r.i32(f); return true;
      case 3:
        read_list(r, f, ThriftType::binary, [&](const auto& list) { m.path.emplace_back(r.list_binary(list)); });
        return true;
      case 4: m.codec = r.i32(f); return true;
      case 5: m.num_values = r.i64(f); return true;
      case 6: m.total_uncompressed_size = r.i64(f); return true;
      case 7: m.total_compressed_size = r.i64(f); return true;
      case 9: m.data_page_offset = r.i64(f); return true;
      case 11: m.dictionary_page_offset = r.i64(f); return true;
      default: return false;
    }
  });
  return m;
}

ColumnChunk read_column_chunk(ThriftCompactReader& r) {
  ColumnChunk c;
  read_struct(r, [&](const Field& f) {
    switch (f.id) {
      case 1: c.file_path = r.string(f); return true;
      case 3:
        if (f.type != ThriftType::struct_) return false;
        c.meta = read_column_metadata(r);
        return true;
      case 8:
      case 9: c.encrypted = true; return false;
      default: return false;
    }
  });
  return c;
}

RowGroup read_row_group(ThriftCompactReader& r) {
  RowGroup g;
  read_struct(r, [&](const Field& f) {
    switch (f.id) {
      case 1:
        read_list(r, f, ThriftType::struct_, [&](const auto&) { g.columns.push_back(read_column_chunk(r)); });
        return true;
      case 2: g.total_byte_size = r.i64(f); return true;
      case 3: g.num_rows = r.i64(f); return true;
      default: return false;
    }
  });
  return g;
}

}  // namespace

std::string physical_type_name(int32_t type) {
  static const char* const names[] = {"BOOLEAN", "INT32",  "INT64",      "INT96",
                                      "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
  return type >= 0 && type < 8 ? names[type] : "type " + std::to_string(type);
}

std::string encoding_name(int32_t encoding) {
  static const char* const names[] = {"PLAIN",
                                      "GROUP_VAR_INT",
                                      "PLAIN_DICTIONARY",
                                      "RLE",
                                      "BIT_PACKED",
                                      "DELTA_BINARY_PACKED",
                                      "DELTA_LENGTH_BYTE_ARRAY",
                                      "DELTA_BYTE_ARRAY",
                                      "RLE_DICTIONARY",
                                      "BYTE_STREAM_SPLIT",
                                      "ALP"};
  return encoding >= 0 && encoding < 11 ? names[encoding] : "encoding " + std::to_string(encoding);
}

std::string codec_name(int32_t codec) {
  static const char* const names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
  return codec >= 0 && codec < 8 ? names[codec] : "codec " + std::to_string(codec);
}

FileMetaData read_file_metadata(ThriftCompactReader& r) {
  FileMetaData m;
  read_struct(r, [&](const Field& f) {
    switch (f.id) {
      case 1: m.version = r.i32(f); return true;
      case 2:
        read_list(r, f, ThriftType::struct_, [&](const auto&) { m.schema.push_back(read_schema_element(r)); });
        return true;
      case 3: m.num_rows = r.i64(f); return true;
      case 4:
        read_list(r, f, ThriftType::struct_, [&](const auto&) { m.row_groups.push_back(read_row_group(r)); });
        return true;
      case 6: m.created_by = r.string(f); return true;
      case 8: m.encrypted = true; return false;
      default: return false;
    }
  });
  return m;
}

PageHeader read_page_header(ThriftCompactReader& r) {
  PageHeader h;
  read_struct(r, [&](const Field& f) {
    switch (f.id) {
      case 1: h.type = r.i32(f); return true;
      case 2: h.uncompressed_size = r.i32(f); return true;
      case 3: h.compressed_size = r.i32(f); return true;
      case 5:  // DataPageHeader
        if (h.type != kDataPage || f.type != ThriftType::struct_) return false;
        h.has_type_header = true;
        read_struct(r, [&](const Field& g) {
          switch (g.id) {
            case 1: h.num_values = r.i32(g); return true;
            case 2: h.encoding = r.i32(g); return true;
            case 3: h.level_encoding = r.i32(g); return true;
            default: return false;
          }
        });
        return true;
      case 7:  // DictionaryPageHeader
        if (h.type != kDictionaryPage || f.type != ThriftType::struct_) return false;
        h.has_type_header = true;
        read_struct(r, [&](const Field& g) {
          switch (g.id) {
            case 1: h.num_values = r.i32(g); return true;
            case 2: h.encoding = r.i32(g); return true;
            default: return false;
          }
        });
        return true;
      case 8:  // DataPageHeaderV2
        if (h.type != kDataPageV2 || f.type != ThriftType::struct_) return false;
        h.has_type_header = true;
        read_struct(r, [&](const Field& g) {
          switch (g.id) {
            case 1: h.num_values = r.i32(g); return true;
            case 4: h.encoding = r.i32(g); return true;
            case 5: h.def_levels_bytes = r.i32(g); return true;
            case 6: h.rep_levels_bytes = r.i32(g); return true;
            case 7: h.is_compressed = r.boolean(g); return true;
            default: return false;
          }
        });
        return true;
      default: return false;
    }
  });
  return h;
}

}  // namespace linea::data::parquet
