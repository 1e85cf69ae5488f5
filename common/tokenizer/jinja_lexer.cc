#include "common/tokenizer/jinja_lexer.h"

#include <cctype>

#include "common/tokenizer/unicode_util.h"

namespace tandem::tokenizer::jinja {
namespace {

Status SyntaxError(int line, const std::string& message) {
  return InvalidArgumentError("template syntax error, line " + std::to_string(line) + ": " + message);
}

int CountLines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Python str.isspace() over the whole (non-empty) string.
bool AllWhitespace(std::string_view s) {
  if (s.empty()) return false;
  size_t pos = 0;
  while (pos < s.size()) {
    if (!IsUnicodeWhitespace(NextCodePoint(s, &pos))) return false;
  }
  return true;
}

std::string_view RStrip(std::string_view s) {
  while (!s.empty()) {
    size_t start = s.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t p = start;
    if (!IsUnicodeWhitespace(NextCodePoint(s, &p))) break;
    s = s.substr(0, start);
  }
  return s;
}

// Length of the whitespace run at s[pos...].
size_t WhitespaceRun(std::string_view s, size_t pos) {
  size_t p = pos;
  while (p < s.size()) {
    size_t next = p;
    if (!IsUnicodeWhitespace(NextCodePoint(s, &next))) break;
    p = next;
  }
  return p - pos;
}

// Finds the end marker of a {{ or {% tag starting its content at `pos`,
// skipping string literals and balanced brackets. Returns the offset of the
// marker ("}}" or "%}", possibly preceded by '-'/'+') or npos.
size_t FindTagEnd(std::string_view s, size_t pos, char close) {
  int depth = 0;
  char quote = 0;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    const bool next_brace = i + 1 < s.size() && s[i + 1] == '}';
    if (quote) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}') {
      if (depth > 0) {
        --depth;
      } else if (c == '}' && close == '}' && next_brace) {
        return i;
      }
    } else if (depth == 0 && c == close && next_brace) {
      return i;
    }
  }
  return std::string_view::npos;
}

// Normalizes newlines to \n and drops one trailing newline (Jinja defaults).
std::string NormalizeSource(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

StatusOr<std::vector<TemplateSegment>> SplitTemplate(std::string_view raw_source) {
  const std::string source = NormalizeSource(raw_source);
  const std::string_view s = source;
  std::vector<TemplateSegment> out;
  size_t pos = 0;
  int line = 1;
  bool line_starting = true;
  bool strip_next = false;
  auto emit_text = [&](std::string_view text) {
    if (!text.empty()) out.push_back({TemplateSegment::Kind::kText, std::string(text), line});
  };
  while (pos <= s.size()) {
    size_t start = s.find('{', pos);
    while (start != std::string_view::npos && start + 1 < s.size() && s[start + 1] != '{' && s[start + 1] != '%' &&
           s[start + 1] != '#') {
      start = s.find('{', start + 1);
    }
    if (start != std::string_view::npos && start + 1 >= s.size()) start = std::string_view::npos;
    std::string_view text = s.substr(pos, (start == std::string_view::npos ? s.size() : start) - pos);
    if (strip_next) {
      const size_t ws = WhitespaceRun(text, 0);
      line += CountLines(text.substr(0, ws));
      text.remove_prefix(ws);
      strip_next = false;
    }
    if (start == std::string_view::npos) {
      emit_text(text);
      break;
    }
    const char kind = s[start + 1];
    const char sign = start + 2 < s.size() ? s[start + 2] : 0;
    const int text_lines = CountLines(text);
    if (sign == '-') {
      text = RStrip(text);
    } else if (sign != '+' && kind != '{') {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && AllWhitespace(text.substr(l_pos))) text = text.substr(0, l_pos);
    }
    emit_text(text);
    line += text_lines;
    const size_t content_begin = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
    size_t end_marker;
    if (kind == '#') {
      end_marker = s.find("#}", content_begin);
    } else {
      end_marker = FindTagEnd(s, content_begin, kind == '{' ? '}' : '%');
    }
    if (end_marker == std::string_view::npos) {
      return SyntaxError(line, std::string("unclosed '{") + kind + "' tag");
    }
    size_t content_end = end_marker;
    char end_sign = 0;
    if (content_end > content_begin && (s[content_end - 1] == '-' || s[content_end - 1] == '+')) {
      end_sign = s[content_end - 1];
      --content_end;
    }
    std::string content(s.substr(content_begin, content_end - content_begin));
    const int tag_line = line;
    line += CountLines(s.substr(start, end_marker + 2 - start));
    pos = end_marker + 2;
    line_starting = false;
    if (kind == '%') {
      // {% raw %} ... {% endraw %}: copy verbatim.
      size_t a = 0;
      while (a < content.size() && std::isspace(static_cast<unsigned char>(content[a]))) ++a;
      size_t b = content.size();
      while (b > a && std::isspace(static_cast<unsigned char>(content[b - 1]))) --b;
      if (content.substr(a, b - a) == "raw") {
        size_t search = pos;
        size_t raw_end = std::string_view::npos, after = 0;
        bool raw_strip = false;
        while ((search = s.find("{%", search)) != std::string_view::npos) {
          size_t p = search + 2;
          bool minus = false;
          if (p < s.size() && (s[p] == '-' || s[p] == '+')) minus = s[p++] == '-';
          while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
          if (s.compare(p, 6, "endraw") == 0) {
            p += 6;
            while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
            if (p < s.size() && (s[p] == '-' || s[p] == '+')) ++p;
            if (s.compare(p, 2, "%}") == 0) {
              raw_end = search;
              after = p + 2;
              raw_strip = minus;
              break;
            }
          }
          search += 2;
        }
        if (raw_end == std::string_view::npos) return SyntaxError(tag_line, "missing endraw");
        std::string_view raw = s.substr(end_sign == '-' ? pos + WhitespaceRun(s, pos) : pos,
                                        raw_end - (end_sign == '-' ? pos + WhitespaceRun(s, pos) : pos));
        if (raw_strip) raw = RStrip(raw);
        out.push_back({TemplateSegment::Kind::kText, std::string(raw), tag_line});
        line += CountLines(s.substr(pos, after - pos));
        pos = after;
        if (pos < s.size() && s[pos] == '\n' && s[after - 3] != '-' && s[after - 3] != '+') {
          ++pos;
          ++line;
          line_starting = true;
        }
        continue;
      }
    }
    if (kind != '#') {
      out.push_back({kind == '{' ? TemplateSegment::Kind::kVariable : TemplateSegment::Kind::kBlock, std::move(content),
                     tag_line});
    }
    if (end_sign == '-') {
      strip_next = true;
    } else if (kind != '{' && end_sign != '+' && pos < s.size() && s[pos] == '\n') {
      ++pos;  // trim_blocks
      ++line;
      line_starting = true;
    }
  }
  return out;
}

StatusOr<std::vector<ExprToken>> TokenizeExpression(std::string_view c, int line) {
  std::vector<ExprToken> tokens;
  size_t i = 0;
  while (i < c.size()) {
    const char ch = c[i];
    if (ch == '\n') {
      ++line;
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(ch))) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      size_t j = i;
      while (j < c.size() && (std::isalnum(static_cast<unsigned char>(c[j])) || c[j] == '_')) ++j;
      tokens.push_back({ExprToken::Kind::kName, std::string(c.substr(i, j - i)), line});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      size_t j = i;
      bool is_float = false;
      while (j < c.size() && (std::isdigit(static_cast<unsigned char>(c[j])) || c[j] == '_')) ++j;
      if (j + 1 < c.size() && c[j] == '.' && std::isdigit(static_cast<unsigned char>(c[j + 1]))) {
        is_float = true;
        ++j;
        while (j < c.size() && std::isdigit(static_cast<unsigned char>(c[j]))) ++j;
      }
      if (j < c.size() && (c[j] == 'e' || c[j] == 'E')) {
        size_t k = j + 1;
        if (k < c.size() && (c[k] == '+' || c[k] == '-')) ++k;
        if (k < c.size() && std::isdigit(static_cast<unsigned char>(c[k]))) {
          is_float = true;
          j = k;
          while (j < c.size() && std::isdigit(static_cast<unsigned char>(c[j]))) ++j;
        }
      }
      std::string num;
      for (size_t k = i; k < j; ++k) {
        if (c[k] != '_') num.push_back(c[k]);
      }
      tokens.push_back({is_float ? ExprToken::Kind::kFloat : ExprToken::Kind::kInt, num, line});
      i = j;
      continue;
    }
    if (ch == '\'' || ch == '"') {
      std::string value;
      size_t j = i + 1;
      bool closed = false;
      while (j < c.size()) {
        const char d = c[j];
        if (d == ch) {
          closed = true;
          ++j;
          break;
        }
        if (d == '\\' && j + 1 < c.size()) {
          const char e = c[j + 1];
          j += 2;
          switch (e) {
            case 'n': value += '\n'; break;
            case 't': value += '\t'; break;
            case 'r': value += '\r'; break;
            case '\\': value += '\\'; break;
            case '\'': value += '\''; break;
            case '"': value += '"'; break;
            case '\n': break;
            case 'u':
            case 'x':
            case 'U': {
              const size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
              if (j + n > c.size()) return SyntaxError(line, "bad escape in string");
              char32_t cp = 0;
              for (size_t k = 0; k < n; ++k) {
                const char h = c[j + k];
                if (!std::isxdigit(static_cast<unsigned char>(h))) return SyntaxError(line, "bad escape in string");
                cp = cp * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
              }
              if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return SyntaxError(line, "bad escape in string");
              AppendUtf8(cp, &value);
              j += n;
              break;
            }
            default: value += '\\'; value += e;
          }
          continue;
        }
        if (d == '\n') ++line;
        value += d;
        ++j;
      }
      if (!closed) return SyntaxError(line, "unterminated string");
      tokens.push_back({ExprToken::Kind::kString, std::move(value), line});
      i = j;
      continue;
    }
    static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                       ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
    bool matched = false;
    for (const char* op : kOps) {
      const std::string_view o(op);
      if (c.compare(i, o.size(), o) == 0) {
        tokens.push_back({ExprToken::Kind::kOp, std::string(o), line});
        i += o.size();
        matched = true;
        break;
      }
    }
    if (!matched) return SyntaxError(line, std::string("unexpected character '") + ch + "'");
  }
  tokens.push_back({ExprToken::Kind::kEnd, "", line});
  return tokens;
}

}  // namespace tandem::tokenizer::jinja
