// HMAC-SHA256 against the seven test cases of RFC 4231 (section 4), the
// truncated one included, plus incremental use and fleet key parsing.
#include "base/hmac_sha256.h"

#include <string>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace fleetjit {
namespace {

struct Rfc4231Case {
  int number;
  std::string key_hex;
  std::string data;  // raw bytes
  std::string mac_hex;
  size_t truncate_to = 32;  // bytes of the tag compared
};

std::string Hex(absl::string_view bytes) {
  return absl::BytesToHexString(bytes);
}
std::string Bytes(absl::string_view hex) { return absl::HexStringToBytes(hex); }

std::vector<Rfc4231Case> Cases() {
  const std::string aa131 = Hex(std::string(131, '\xaa'));
  return {
      {1, Hex(std::string(20, '\x0b')), "Hi There",
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {2, Hex("Jefe"), "what do ya want for nothing?",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {3, Hex(std::string(20, '\xaa')), std::string(50, '\xdd'),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {4, "0102030405060708090a0b0c0d0e0f10111213141516171819",
       std::string(50, '\xcd'),
       "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {5, Hex(std::string(20, '\x0c')), "Test With Truncation",
       "a3b6167473100ee06e0c796c2955552b", 16},
      {6, aa131, "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {7, aa131,
       "This is a test using a larger than block-size key and a larger than "
       "block-size data. The key needs to be hashed before being used by the "
       "HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
}

TEST(HmacSha256Test, Rfc4231TestVectors) {
  for (const Rfc4231Case& c : Cases()) {
    SCOPED_TRACE(::testing::Message() << "RFC 4231 test case " << c.number);
    Sha256::Digest tag = HmacSha256::Mac(Bytes(c.key_hex), c.data);
    std::string tag_bytes(reinterpret_cast<const char*>(tag.data()),
                          tag.size());
    EXPECT_EQ(Hex(tag_bytes.substr(0, c.truncate_to)), c.mac_hex);
  }
}

TEST(HmacSha256Test, IncrementalEqualsOneShotAtEverySplit) {
  const Rfc4231Case c = Cases()[6];
  for (size_t split = 0; split <= c.data.size(); split += 7) {
    HmacSha256 mac(Bytes(c.key_hex));
    mac.Update(absl::string_view(c.data).substr(0, split));
    mac.Update(absl::string_view(c.data).substr(split));
    EXPECT_EQ(mac.Finish(), HmacSha256::Mac(Bytes(c.key_hex), c.data)) << split;
  }
}

TEST(HmacSha256Test, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(HmacSha256Test, ParseFleetKey) {
  const std::string hex64(64, 'a');
  EXPECT_EQ(*ParseFleetKey(hex64), std::string(32, '\xaa'));
  EXPECT_EQ(*ParseFleetKey("raw:" + hex64), hex64);
  EXPECT_EQ(*ParseFleetKey("hex:" + std::string(32, '0')),
            std::string(16, '\0'));
  EXPECT_EQ(*ParseFleetKey("correct horse battery staple"),
            "correct horse battery staple");
  EXPECT_FALSE(ParseFleetKey("").ok());
  EXPECT_FALSE(ParseFleetKey("short").ok());
  EXPECT_FALSE(ParseFleetKey("hex:abc").ok());
  // The message never repeats the key.
  absl::Status s = ParseFleetKey("hunter2").status();
  EXPECT_EQ(s.message().find("hunter2"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace fleetjit
