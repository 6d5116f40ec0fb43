#include "vote.hpp"

#include <string_view>

namespace redlock {

Vote classify(const Reply& answer) {
  const Reply& reply = result_of(answer);
  switch (reply.type) {
    case Reply::Type::status:
      return std::string_view(reply.str) == "OK" ? Vote::yes : Vote::failed;
    case Reply::Type::integer:
      return reply.integer > 0 ? Vote::yes : Vote::no;
    case Reply::Type::nil:
      return Vote::no;
    case Reply::Type::string:
    case Reply::Type::array:
    case Reply::Type::error:
      return Vote::failed;
  }
  return Vote::failed;
}

}  // namespace redlock
