#include "matrix/csv.h"

#include "matrix/text.h"

namespace scalebench {
namespace {

/// Cursor over the text that tracks 1-based line and column.
class Cursor {
 public:
  explicit Cursor(const std::string& text) : text_(text) {}
  [[nodiscard]] bool done() const { return pos_ >= text_.size(); }
  [[nodiscard]] char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  char take() {
    const char c = text_[pos_++];
    if (c == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    return c;
  }
  [[nodiscard]] int line() const { return line_; }
  [[nodiscard]] int column() const { return column_; }
  [[nodiscard]] bool at_record_end() const {
    return done() || peek() == '\n' || (peek() == '\r' && peek(1) == '\n');
  }
  void skip_record_end() {
    if (peek() == '\r') take();
    if (peek() == '\n') take();
  }

 private:
  const std::string& text_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
};

/// Reads a quoted field starting at the opening quote; false on a syntax error.
bool read_quoted(Cursor& cursor, CsvField& field, const std::string& file,
                 Diagnostics& diagnostics) {
  cursor.take();  // opening quote
  while (true) {
    if (cursor.done()) {
      diagnostics.error({file, field.line, field.column, ""},
                        "unclosed quote: this quoted field never ends; add the closing \"");
      return false;
    }
    const char c = cursor.take();
    if (c != '"') {
      field.value += c;
    } else if (cursor.peek() == '"') {
      field.value += cursor.take();
    } else {
      break;
    }
  }
  if (!cursor.at_record_end() && cursor.peek() != ',') {
    diagnostics.error(
        {file, cursor.line(), cursor.column(), ""},
        "text after a closing quote; quote the whole field and write \"\" for a quote inside it");
    return false;
  }
  return true;
}

}  // namespace

std::vector<CsvRecord> parse_csv(const std::string& text, const std::string& file,
                                 Diagnostics& diagnostics) {
  std::vector<CsvRecord> records;
  Cursor cursor(text);
  while (!cursor.done()) {
    if (cursor.at_record_end()) {  // blank line
      cursor.skip_record_end();
      continue;
    }
    // A line starting with '#' is a comment (scalebench's addition: a shipped task file says
    // what it needs in its first line; a field starting with '#' is quoted).
    if (cursor.peek() == '#') {
      while (!cursor.at_record_end()) cursor.take();
      cursor.skip_record_end();
      continue;
    }
    CsvRecord record{cursor.line(), {}};
    while (true) {
      CsvField field{"", cursor.line(), cursor.column()};
      if (cursor.peek() == '"') {
        if (!read_quoted(cursor, field, file, diagnostics)) return records;
      } else {
        while (!cursor.at_record_end() && cursor.peek() != ',') {
          if (cursor.peek() == '"') {
            diagnostics.error({file, cursor.line(), cursor.column(), ""},
                              "quote inside an unquoted field; quote the whole field and write "
                              "\"\" for the quote");
            return records;
          }
          field.value += cursor.take();
        }
      }
      record.fields.push_back(std::move(field));
      if (record.fields.size() > kMaxCsvFields) {  // See Note [Input limits]
        diagnostics.error({file, record.line, 1, ""},
                          "row has more than " + std::to_string(kMaxCsvFields) +
                              " fields, the limit for a task file; a CytoDL task row has 6 "
                              "(training) or 7 (inference)");
        return records;
      }
      if (cursor.peek() == ',') {
        cursor.take();
        continue;
      }
      cursor.skip_record_end();
      break;
    }
    if (records.size() > kMaxCsvRows) {  // the header and kMaxCsvRows rows read
      diagnostics.error({file, record.line, 1, ""},
                        "more than " + std::to_string(kMaxCsvRows) +
                            " rows, the limit for a task file; split it into several files");
      return records;
    }
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace scalebench
