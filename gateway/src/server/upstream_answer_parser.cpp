#include "server/upstream_answer_parser.h"

#include <algorithm>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <cstring>

namespace prefixgate::gateway::server {

std::string_view UpstreamAnswerParser::content_type() const {
  if (content_type_size_ > content_type_short_.size()) return content_type_long_;
  return std::string_view(content_type_short_.data(), content_type_size_);
}

void UpstreamAnswerParser::on_field_impl(boost::beast::http::field name, string_view,
                                         string_view value, error_code&) {
  if (name != boost::beast::http::field::content_type || has_content_type_) return;
  has_content_type_ = true;
  content_type_size_ = value.size();
  if (value.size() <= content_type_short_.size()) {
    std::memcpy(content_type_short_.data(), value.data(), value.size());
  } else {
    content_type_long_.assign(value.data(), value.size());
  }
}

std::size_t UpstreamAnswerParser::take(string_view body, error_code& ec) {
  if (body_data_ == nullptr) {
    ec = boost::beast::http::error::need_buffer;
    return 0;
  }
  const std::size_t n = std::min(body.size(), body_room_);
  std::memcpy(body_data_, body.data(), n);
  body_data_ += n;
  body_room_ -= n;
  if (n < body.size()) ec = boost::beast::http::error::need_buffer;
  return n;
}

}  // namespace prefixgate::gateway::server
