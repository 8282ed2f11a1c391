// Two ends of a loopback TCP connection on an io_context of their own, for tests of what the
// serving core does on a socket.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace prefixgate::testing {

struct SocketPair {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket a{ioc};
  boost::asio::ip::tcp::socket b{ioc};
  SocketPair() {
    using boost::asio::ip::tcp;
    tcp::acceptor acceptor(ioc, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
    a.connect(acceptor.local_endpoint());
    acceptor.accept(b);
  }
};

}  // namespace prefixgate::testing
