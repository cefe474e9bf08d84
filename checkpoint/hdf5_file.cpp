#include "checkpoint/hdf5_file.h"

#include <hdf5.h>

#include <algorithm>
#include <stdexcept>
#include <type_traits>
#include <utility>

static_assert(std::is_same_v<hid_t, int64_t>, "Hdf5File stores hid_t as int64_t (HDF5 >= 1.10)");
#ifndef H5_HAVE_THREADSAFE
#error "Hdf5File is used from the checkpoint writer's thread: it needs HDF5 built thread-safe"
#endif

namespace linea {

namespace {

// Datasets holding bf16 are uint16 datasets carrying this attribute.
constexpr const char* kDTypeAttribute = "linea_dtype";

// HDF5 prints every error stack to stderr unless told not to; the setting is per thread in
// thread-safe builds, so each thread that enters the wrapper turns it off once. Before the library
// starts, its clean-up at exit is turned off: a file whose close failed (a full disk) stays in
// HDF5's tables, and closing it again at exit crashed the process (SIGSEGV in H5F__close_cb)
// after it had reported the error. Every file linea keeps is closed and fsync'ed explicitly.
void silence_hdf5_error_printing() {
  static const bool no_cleanup_at_exit = (H5dont_atexit(), true);
  (void)no_cleanup_at_exit;
  thread_local bool silenced = false;
  if (!silenced) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    silenced = true;
  }
}

// HDF5's account of the last failure on this thread: the innermost reason (it carries errno and
// the file name where there are any), on one line. Clears the error stack.
std::string take_hdf5_error_reason() {
  std::string reason;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* error, void* data) -> herr_t {
        auto* out = static_cast<std::string*>(data);
        if (out->empty() && error->desc) *out = error->desc;
        return 0;
      },
      &reason);
  H5Eclear2(H5E_DEFAULT);
  std::replace(reason.begin(), reason.end(), '\n', ' ');
  return reason.empty() ? "no reason given by HDF5" : reason;
}

// What an error message names: the file and, when there is one, the object inside it.
struct Location {
  const std::filesystem::path& file;
  std::string object;  // e.g. "dataset 'w'"; empty for the file itself

  std::string describe() const { return "HDF5 file '" + file.string() + "'" + (object.empty() ? "" : ", " + object); }
  [[noreturn]] void fail(std::string_view problem) const {
    throw std::runtime_error(describe() + ": " + std::string(problem));
  }
  [[noreturn]] void fail_hdf5(std::string_view operation) const {
    throw std::runtime_error(describe() + ": " + std::string(operation) + " failed (" + take_hdf5_error_reason() + ")");
  }
};

Location dataset_location(const std::filesystem::path& file, std::string_view name) {
  return {file, "dataset '" + std::string(name) + "'"};
}
Location attribute_location(const std::filesystem::path& file, std::string_view object, std::string_view name) {
  const bool root = object.empty() || object == "/";
  return {file, "attribute '" + std::string(name) + "' of " + (root ? "the file" : "'" + std::string(object) + "'")};
}

// Negative HDF5 results (hid_t, herr_t, htri_t) become exceptions.
template <class Result>
Result check(Result result, const Location& at, std::string_view operation) {
  if (result < 0) at.fail_hdf5(operation);
  return result;
}

// Owns one HDF5 identifier and releases it with the matching H5?close.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), close_(other.close_) {}
  Handle& operator=(Handle&&) = delete;
  Handle(const Handle&) = delete;
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

Handle checked_handle(hid_t id, herr_t (*close)(hid_t), const Location& at, std::string_view operation) {
  return Handle(check(id, at, operation), close);
}

void check_name(std::string_view name, std::string_view what, const Location& at) {
  if (name.empty() || name.find('\0') != std::string_view::npos || name.find_first_not_of('/') == name.npos) {
    throw std::invalid_argument(at.describe() + ": " + std::string(what) + " name must be non-empty, not only '/', " +
                                "and contain no NUL byte");
  }
}

// Object paths of the attribute API: "" means the file's root group.
std::string object_path(std::string_view object) { return object.empty() ? "/" : std::string(object); }

enum class ObjectKind { none, group, dataset, other };

// What `path` names in the file, walking it one component at a time so that a missing or
// non-group intermediate component reads as "none" rather than as an HDF5 error.
ObjectKind object_kind(hid_t file, std::string_view path, const Location& at) {
  std::string prefix;
  size_t begin = 0;
  ObjectKind kind = ObjectKind::group;  // the root
  while (begin < path.size()) {
    size_t end = path.find('/', begin);
    if (end == path.npos) end = path.size();
    if (end > begin) {
      if (kind != ObjectKind::group) return ObjectKind::none;
      prefix += "/";
      prefix.append(path.substr(begin, end - begin));
      if (!check(H5Lexists(file, prefix.c_str(), H5P_DEFAULT), at, "looking up '" + prefix + "'")) {
        return ObjectKind::none;
      }
      Handle object =
          checked_handle(H5Oopen(file, prefix.c_str(), H5P_DEFAULT), H5Oclose, at, "opening '" + prefix + "'");
      const H5I_type_t type = H5Iget_type(object.get());
      kind = type == H5I_GROUP ? ObjectKind::group : type == H5I_DATASET ? ObjectKind::dataset : ObjectKind::other;
    }
    begin = end + 1;
  }
  return kind;
}

// The type HDF5 converts to and from in memory, and the (little-endian) type stored in files.
hid_t memory_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return H5T_NATIVE_FLOAT;
    case DType::f64: return H5T_NATIVE_DOUBLE;
    case DType::bf16: return H5T_NATIVE_UINT16;
    case DType::i32: return H5T_NATIVE_INT32;
    case DType::i64: return H5T_NATIVE_INT64;
  }
  throw std::invalid_argument("Hdf5File: unknown dtype");
}
hid_t file_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return H5T_IEEE_F32LE;
    case DType::f64: return H5T_IEEE_F64LE;
    case DType::bf16: return H5T_STD_U16LE;
    case DType::i32: return H5T_STD_I32LE;
    case DType::i64: return H5T_STD_I64LE;
  }
  throw std::invalid_argument("Hdf5File: unknown dtype");
}

std::string describe_stored_type(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::string bits = std::to_string(8 * H5Tget_size(type)) + "-bit ";
  switch (cls) {
    case H5T_INTEGER: return bits + (H5Tget_sign(type) == H5T_SGN_NONE ? "unsigned integer" : "signed integer");
    case H5T_FLOAT: return bits + "float";
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum";
    default: return "HDF5 type class " + std::to_string(static_cast<int>(cls));
  }
}

// Reads a string attribute, fixed-length or variable-length (as h5py writes them).
std::string read_string_attribute(hid_t attribute, const Location& at) {
  Handle type = checked_handle(H5Aget_type(attribute), H5Tclose, at, "reading the type");
  if (H5Tget_class(type.get()) != H5T_STRING) at.fail("expected a string, found a " + describe_stored_type(type.get()));
  Handle space = checked_handle(H5Aget_space(attribute), H5Sclose, at, "reading the dataspace");
  if (H5Sget_simple_extent_npoints(space.get()) != 1) at.fail("expected a single string");
  if (check(H5Tis_variable_str(type.get()), at, "reading the type")) {
    Handle memory = checked_handle(H5Tcopy(H5T_C_S1), H5Tclose, at, "making a string type");
    check(H5Tset_size(memory.get(), H5T_VARIABLE), at, "making a string type");
    check(H5Tset_cset(memory.get(), H5Tget_cset(type.get())), at, "making a string type");  // HDF5 won't convert
    char* text = nullptr;
    check(H5Aread(attribute, memory.get(), &text), at, "reading");
    std::string value = text ? text : "";
    H5free_memory(text);
    return value;
  }
  // Fixed-length: read the stored bytes as they are and stop at the first NUL (null-terminated or
  // null-padded alike).
  const size_t size = H5Tget_size(type.get());
  std::string value(size, '\0');
  check(H5Aread(attribute, type.get(), value.data()), at, "reading");
  value.resize(value.find('\0') == value.npos ? size : value.find('\0'));
  return value;
}

std::vector<int64_t> read_int_attribute(hid_t attribute, const Location& at) {
  Handle type = checked_handle(H5Aget_type(attribute), H5Tclose, at, "reading the type");
  if (H5Tget_class(type.get()) != H5T_INTEGER) {
    at.fail("expected integers, found a " + describe_stored_type(type.get()));
  }
  Handle space = checked_handle(H5Aget_space(attribute), H5Sclose, at, "reading the dataspace");
  if (H5Sget_simple_extent_type(space.get()) == H5S_NULL) return {};
  if (H5Sget_simple_extent_ndims(space.get()) > 1) at.fail("expected a scalar or a 1-D array of integers");
  std::vector<int64_t> values(check(H5Sget_simple_extent_npoints(space.get()), at, "reading the dataspace"));
  if (!values.empty()) check(H5Aread(attribute, H5T_NATIVE_INT64, values.data()), at, "reading");
  return values;
}

// Float-to-float element conversion through double; bf16 goes through float (f64 → bf16 thus
// rounds twice, which can differ from a direct rounding in the last bf16 bit).
template <class T>
double widen(T x) {
  return static_cast<double>(x);
}
double widen(bf16 x) { return static_cast<float>(x); }
template <class T>
T narrow(double x) {
  return static_cast<T>(x);
}
template <>
bf16 narrow<bf16>(double x) {
  return bf16(static_cast<float>(x));
}

template <class To, class From>
void convert_elements(const From* src, To* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = narrow<To>(widen(src[i]));
}

template <class Fn>
void visit_float_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: fn(float{}); return;
    case DType::f64: fn(double{}); return;
    case DType::bf16: fn(bf16{}); return;
    default: throw std::logic_error("visit_float_dtype: not a float dtype");
  }
}

bool is_float_dtype(DType dtype) { return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16; }

}  // namespace

Hdf5File::Hdf5File(std::filesystem::path path, int64_t file_id, bool writable)
    : path_(std::move(path)), file_id_(file_id), writable_(writable) {}

Hdf5File::Hdf5File(Hdf5File&& other) noexcept
    : path_(std::move(other.path_)), file_id_(std::exchange(other.file_id_, -1)), writable_(other.writable_) {}

Hdf5File& Hdf5File::operator=(Hdf5File&& other) noexcept {
  if (this != &other) {
    if (file_id_ >= 0) H5Fclose(file_id_);
    path_ = std::move(other.path_);
    file_id_ = std::exchange(other.file_id_, -1);
    writable_ = other.writable_;
  }
  return *this;
}

Hdf5File::~Hdf5File() {
  if (file_id_ >= 0) {
    silence_hdf5_error_printing();
    H5Fclose(file_id_);
  }
}

namespace {
// File access: close everything still open with the file, and do not fail where the file system
// does not support locking (network file systems).
Handle file_access_properties(const Location& at) {
  Handle fapl = checked_handle(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, at, "making file access properties");
  check(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG), at, "setting the close degree");
  check(H5Pset_file_locking(fapl.get(), true, true), at, "setting file locking");
  return fapl;
}
}  // namespace

Hdf5File Hdf5File::open(const std::filesystem::path& path, Access access) {
  silence_hdf5_error_printing();
  const Location at{path, ""};
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) at.fail("cannot open: no such file");
  if (std::filesystem::is_directory(path, ec)) at.fail("cannot open: it is a directory");
  if (check(H5Fis_hdf5(path.c_str()), at, "checking the file signature") <= 0) {
    at.fail("cannot open: not an HDF5 file (no HDF5 signature)");
  }
  Handle fapl = file_access_properties(at);
  const bool writable = access == Access::read_write;
  const hid_t id = check(H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl.get()), at,
                         writable ? "opening for writing" : "opening for reading");
  return Hdf5File(path, id, writable);
}

Hdf5File Hdf5File::create(const std::filesystem::path& path, Create mode) {
  silence_hdf5_error_printing();
  const Location at{path, ""};
  std::error_code ec;
  if (mode == Create::exclusive && std::filesystem::exists(path, ec)) at.fail("cannot create: the file already exists");
  Handle fapl = file_access_properties(at);
  const hid_t id =
      check(H5Fcreate(path.c_str(), mode == Create::exclusive ? H5F_ACC_EXCL : H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()),
            at, "creating");
  return Hdf5File(path, id, true);
}

void Hdf5File::close() {
  if (file_id_ < 0) return;
  silence_hdf5_error_printing();
  const Location at{path_, ""};
  const hid_t id = std::exchange(file_id_, -1);
  if (writable_) {
    if (H5Fflush(id, H5F_SCOPE_LOCAL) < 0) {
      const std::string reason = take_hdf5_error_reason();
      H5Fclose(id);
      at.fail("flushing before close failed (" + reason + ")");
    }
  }
  check(H5Fclose(id), at, "closing");
}

void Hdf5File::flush() {
  require_writable("flush");
  check(H5Fflush(file_id_, H5F_SCOPE_LOCAL), Location{path_, ""}, "flushing");
}

void Hdf5File::require_open(std::string_view operation) const {
  silence_hdf5_error_printing();
  if (file_id_ < 0) {
    throw std::logic_error("HDF5 file '" + path_.string() + "': " + std::string(operation) + " on a closed file");
  }
}

void Hdf5File::require_writable(std::string_view operation) const {
  require_open(operation);
  if (!writable_) {
    throw std::logic_error("HDF5 file '" + path_.string() + "': " + std::string(operation) +
                           " on a file opened read-only");
  }
}

bool Hdf5File::has_dataset(std::string_view name) const {
  require_open("has_dataset");
  const Location at = dataset_location(path_, name);
  check_name(name, "dataset", at);
  return object_kind(file_id_, name, at) == ObjectKind::dataset;
}

std::vector<std::string> Hdf5File::dataset_names() const {
  require_open("dataset_names");
  const Location at{path_, ""};
  // Collect the hard links first (no exception may cross HDF5's C callback), then keep datasets.
  std::vector<std::string> links;
  check(H5Lvisit(
            file_id_, H5_INDEX_NAME, H5_ITER_INC,
            [](hid_t, const char* name, const auto* info, void* data) -> herr_t {
              if (info->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(data)->emplace_back(name);
              return 0;
            },
            &links),
        at, "listing datasets");
  std::vector<std::string> datasets;
  for (std::string& link : links) {
    if (object_kind(file_id_, link, at) == ObjectKind::dataset) datasets.push_back(std::move(link));
  }
  return datasets;
}

namespace {
Handle open_dataset(hid_t file, std::string_view name, const Location& at) {
  check_name(name, "dataset", at);
  const ObjectKind kind = object_kind(file, name, at);
  if (kind == ObjectKind::none) at.fail("no such dataset");
  if (kind != ObjectKind::dataset) at.fail("exists but is not a dataset");
  return checked_handle(H5Dopen2(file, std::string(name).c_str(), H5P_DEFAULT), H5Dclose, at, "opening");
}

Hdf5DatasetInfo read_dataset_info(hid_t dataset, const Location& at) {
  Hdf5DatasetInfo info;
  Handle space = checked_handle(H5Dget_space(dataset), H5Sclose, at, "reading the dataspace");
  if (H5Sget_simple_extent_type(space.get()) == H5S_NULL) at.fail("has a null dataspace (no elements, no shape)");
  const int ndims = check(H5Sget_simple_extent_ndims(space.get()), at, "reading the dataspace");
  if (ndims > 6) at.fail("has " + std::to_string(ndims) + " dimensions; a Tensor holds at most 6");
  std::vector<hsize_t> dims(ndims);
  check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), at, "reading the dataspace");
  info.shape.assign(dims.begin(), dims.end());

  Handle type = checked_handle(H5Dget_type(dataset), H5Tclose, at, "reading the type");
  const H5T_class_t cls = H5Tget_class(type.get());
  const size_t size = H5Tget_size(type.get());
  const bool is_signed = H5Tget_sign(type.get()) == H5T_SGN_2;
  const auto tagged_bf16 = [&] {
    if (!check(H5Aexists(dataset, kDTypeAttribute), at, "looking up attribute 'linea_dtype'")) return false;
    Handle attribute =
        checked_handle(H5Aopen(dataset, kDTypeAttribute, H5P_DEFAULT), H5Aclose, at, "opening attribute 'linea_dtype'");
    return read_string_attribute(attribute.get(), at) == "bf16";
  };
  if (cls == H5T_FLOAT && size == 4) {
    info.dtype = DType::f32;
  } else if (cls == H5T_FLOAT && size == 8) {
    info.dtype = DType::f64;
  } else if (cls == H5T_INTEGER && size == 4 && is_signed) {
    info.dtype = DType::i32;
  } else if (cls == H5T_INTEGER && size == 8 && is_signed) {
    info.dtype = DType::i64;
  } else if (cls == H5T_INTEGER && size == 2 && !is_signed && tagged_bf16()) {
    info.dtype = DType::bf16;
  } else {
    at.fail("stored as " + describe_stored_type(type.get()) +
            "; linea reads 32/64-bit floats, 32/64-bit signed integers and bf16 (16-bit unsigned tagged " +
            "linea_dtype = \"bf16\")");
  }
  return info;
}
}  // namespace

Hdf5DatasetInfo Hdf5File::dataset_info(std::string_view name) const {
  require_open("dataset_info");
  const Location at = dataset_location(path_, name);
  Handle dataset = open_dataset(file_id_, name, at);
  return read_dataset_info(dataset.get(), at);
}

void Hdf5File::write(std::string_view name, const Tensor& tensor) {
  require_writable("write");
  const Location at = dataset_location(path_, name);
  check_name(name, "dataset", at);
  if (!tensor.defined()) throw std::invalid_argument(at.describe() + ": cannot write an undefined tensor");
  if (object_kind(file_id_, name, at) != ObjectKind::none) at.fail("cannot write: the name already exists");
  for (size_t slash = name.find('/', 1); slash != name.npos; slash = name.find('/', slash + 1)) {
    const std::string_view parent = name.substr(0, slash);
    const ObjectKind kind = object_kind(file_id_, parent, at);
    if (kind != ObjectKind::none && kind != ObjectKind::group) {
      at.fail("cannot write: '" + std::string(parent) + "' exists and is not a group");
    }
  }
  const Tensor host = tensor.device() == Device::cpu ? tensor : tensor.clone();

  std::vector<hsize_t> dims(host.shape().begin(), host.shape().end());
  Handle space =
      checked_handle(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(host.ndim(), dims.data(), nullptr),
                     H5Sclose, at, "making the dataspace");
  Handle link_properties = checked_handle(H5Pcreate(H5P_LINK_CREATE), H5Pclose, at, "making link properties");
  check(H5Pset_create_intermediate_group(link_properties.get(), 1), at, "making link properties");
  const std::string path(name);
  Handle dataset = checked_handle(H5Dcreate2(file_id_, path.c_str(), file_type(host.dtype()), space.get(),
                                             link_properties.get(), H5P_DEFAULT, H5P_DEFAULT),
                                  H5Dclose, at, "creating");
  try {
    if (host.numel() > 0) {
      check(H5Dwrite(dataset.get(), memory_type(host.dtype()), H5S_ALL, H5S_ALL, H5P_DEFAULT, host.raw()), at,
            "writing " + host.describe());
    }
    if (host.dtype() == DType::bf16) set_attribute(name, kDTypeAttribute, "bf16");
  } catch (...) {
    H5Ldelete(file_id_, path.c_str(), H5P_DEFAULT);  // leave no half-written dataset behind
    H5Eclear2(H5E_DEFAULT);
    throw;
  }
}

Tensor Hdf5File::read(std::string_view name) const {
  require_open("read");
  const Location at = dataset_location(path_, name);
  Handle dataset = open_dataset(file_id_, name, at);
  const Hdf5DatasetInfo info = read_dataset_info(dataset.get(), at);
  Tensor tensor = Tensor::empty(info.shape, info.dtype);
  if (tensor.numel() > 0) {
    check(H5Dread(dataset.get(), memory_type(info.dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, tensor.raw()), at,
          "reading " + tensor.describe());
  }
  return tensor;
}

Tensor Hdf5File::read(std::string_view name, DType dtype) const {
  if (!is_float_dtype(dtype)) {
    throw std::invalid_argument(dataset_location(path_, name).describe() +
                                ": conversion is to f32, f64 or bf16 only, not " + std::string(dtype_name(dtype)));
  }
  Tensor stored = read(name);
  if (stored.dtype() == dtype) return stored;
  if (!is_float_dtype(stored.dtype())) {
    dataset_location(path_, name)
        .fail("stored as " + std::string(dtype_name(stored.dtype())) + ", which is not converted to " +
              std::string(dtype_name(dtype)));
  }
  Tensor converted = Tensor::empty(stored.shape(), dtype);
  visit_float_dtype(stored.dtype(), [&](auto from) {
    visit_float_dtype(dtype, [&](auto to) {
      using From = decltype(from);
      using To = decltype(to);
      convert_elements(stored.data<From>(), converted.data<To>(), stored.numel());
    });
  });
  return converted;
}

namespace {
// Opens the object that carries attributes: a dataset or group path, or the root group.
Handle open_attribute_owner(hid_t file, std::string_view object, const Location& at) {
  const std::string path = object_path(object);
  if (object_kind(file, path, at) == ObjectKind::none) at.fail("no such object '" + path + "'");
  return checked_handle(H5Oopen(file, path.c_str(), H5P_DEFAULT), H5Oclose, at, "opening the owner");
}

// Creates attribute `name` on `owner` (replacing any existing one) and writes `data` as `type`.
void write_attribute(hid_t owner, std::string_view name, hid_t type, hid_t space, const void* data,
                     const Location& at) {
  const std::string attribute_name(name);
  if (check(H5Aexists(owner, attribute_name.c_str()), at, "looking up")) {
    check(H5Adelete(owner, attribute_name.c_str()), at, "replacing");
  }
  Handle attribute = checked_handle(H5Acreate2(owner, attribute_name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT),
                                    H5Aclose, at, "creating");
  if (H5Sget_simple_extent_type(space) != H5S_NULL) check(H5Awrite(attribute.get(), type, data), at, "writing");
}

Handle open_attribute(hid_t file, std::string_view object, std::string_view name, const Location& at) {
  Handle owner = open_attribute_owner(file, object, at);
  const std::string attribute_name(name);
  if (!check(H5Aexists(owner.get(), attribute_name.c_str()), at, "looking up")) at.fail("no such attribute");
  return checked_handle(H5Aopen(owner.get(), attribute_name.c_str(), H5P_DEFAULT), H5Aclose, at, "opening");
}
}  // namespace

void Hdf5File::set_attribute(std::string_view object, std::string_view name, std::string_view value) {
  require_writable("set_attribute");
  const Location at = attribute_location(path_, object, name);
  check_name(name, "attribute", at);
  if (value.find('\0') != value.npos) throw std::invalid_argument(at.describe() + ": value contains a NUL byte");
  Handle owner = open_attribute_owner(file_id_, object, at);
  Handle type = checked_handle(H5Tcopy(H5T_C_S1), H5Tclose, at, "making a string type");
  check(H5Tset_size(type.get(), std::max<size_t>(value.size(), 1)), at, "making a string type");
  check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), at, "making a string type");
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), at, "making a string type");
  Handle space = checked_handle(H5Screate(H5S_SCALAR), H5Sclose, at, "making the dataspace");
  const std::string padded = value.empty() ? std::string(1, '\0') : std::string(value);
  write_attribute(owner.get(), name, type.get(), space.get(), padded.data(), at);
}

void Hdf5File::set_attribute(std::string_view object, std::string_view name, int64_t value) {
  require_writable("set_attribute");
  const Location at = attribute_location(path_, object, name);
  check_name(name, "attribute", at);
  Handle owner = open_attribute_owner(file_id_, object, at);
  Handle space = checked_handle(H5Screate(H5S_SCALAR), H5Sclose, at, "making the dataspace");
  write_attribute(owner.get(), name, H5T_NATIVE_INT64, space.get(), &value, at);
}

void Hdf5File::set_attribute(std::string_view object, std::string_view name, const std::vector<int64_t>& values) {
  require_writable("set_attribute");
  const Location at = attribute_location(path_, object, name);
  check_name(name, "attribute", at);
  Handle owner = open_attribute_owner(file_id_, object, at);
  const hsize_t count = values.size();
  // An empty array (the full_shape of a scalar) is stored with HDF5's null dataspace.
  Handle space = checked_handle(values.empty() ? H5Screate(H5S_NULL) : H5Screate_simple(1, &count, nullptr), H5Sclose,
                                at, "making the dataspace");
  write_attribute(owner.get(), name, H5T_NATIVE_INT64, space.get(), values.data(), at);
}

bool Hdf5File::has_attribute(std::string_view object, std::string_view name) const {
  require_open("has_attribute");
  const Location at = attribute_location(path_, object, name);
  check_name(name, "attribute", at);
  Handle owner = open_attribute_owner(file_id_, object, at);
  return check(H5Aexists(owner.get(), std::string(name).c_str()), at, "looking up") > 0;
}

std::string Hdf5File::string_attribute(std::string_view object, std::string_view name) const {
  require_open("string_attribute");
  const Location at = attribute_location(path_, object, name);
  check_name(name, "attribute", at);
  Handle attribute = open_attribute(file_id_, object, name, at);
  return read_string_attribute(attribute.get(), at);
}

int64_t Hdf5File::int_attribute(std::string_view object, std::string_view name) const {
  require_open("int_attribute");
  const Location at = attribute_location(path_, object, name);
  check_name(name, "attribute", at);
  Handle attribute = open_attribute(file_id_, object, name, at);
  const std::vector<int64_t> values = read_int_attribute(attribute.get(), at);
  if (values.size() != 1) at.fail("expected one integer, found " + std::to_string(values.size()));
  return values[0];
}

std::vector<int64_t> Hdf5File::int_array_attribute(std::string_view object, std::string_view name) const {
  require_open("int_array_attribute");
  const Location at = attribute_location(path_, object, name);
  check_name(name, "attribute", at);
  Handle attribute = open_attribute(file_id_, object, name, at);
  return read_int_attribute(attribute.get(), at);
}

}  // namespace linea
