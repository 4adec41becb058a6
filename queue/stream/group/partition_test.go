package group

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// Published MurmurHash3 x86_32 vectors. Sources:
//   - boostorg/hash2 test/murmur3_32 (the vectors of
//     stackoverflow.com/questions/14747343, "MurmurHash3 test vectors");
//   - spaolacci/murmur3 murmur_test.go (the hash RabbitMQ's Go stream
//     client routes super streams with);
//   - git t/t0095-bloom.sh ("Hello world!", the fox);
//   - rabbitmq-stream-java-client HashUtilsTest (seeds 104729 and 42).
var murmurVectors = []struct {
	in   string
	seed uint32
	want uint32
}{
	{"", 0, 0},
	{"", 1, 0x514E28B7},
	{"", 0xFFFFFFFF, 0x81F16F39},
	{"\xFF\xFF\xFF\xFF", 0, 0x76293B50},
	{"\x21\x43\x65\x87", 0, 0xF55B516B},
	{"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE},
	{"\x21\x43\x65", 0, 0x7E4A8634},
	{"\x21\x43", 0, 0xA0F7B07A},
	{"\x21", 0, 0x72661CF4},
	{"\x00\x00\x00\x00", 0, 0x2362F9DE},
	{"\x00\x00\x00", 0, 0x85F0B427},
	{"\x00\x00", 0, 0x30F4C306},
	{"\x00", 0, 0x514E28B7},
	{"abc", 0, 0xB3DD93FA},
	{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 0, 0xEE925B90},
	{"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD},
	{"The quick brown fox jumps over the lazy dog", 0, 0x2e4ff723},
	{"Hello world!", 0, 0x627b0c2c},
	{"hello", 0, 0x248bfa47},
	{"hello, world", 0, 0x149bbb7f},
	{"19 Jan 2038 at 3:14:07 AM", 0, 0xe31e8a70},
	{"The quick brown fox jumps over the lazy dog.", 0, 0xd5c48bfc},
	{"hello", 1, 0xbb4abcad},
	{"The quick brown fox jumps over the lazy dog.", 0x2a, 0xc02d1434},
	// RabbitMQ's stream clients: the default seed, and seed 42.
	{"hello", Seed, 1321743225},
	{"brave", Seed, 3825276426},
	{"new", Seed, 2970740106},
	{"world", Seed, 2453398188},
	{"hello", 42, 3806057185},
	{"brave", 42, 619588758},
	{"new", 42, 1483300585},
	{"world", 42, 1145629360},
}

func TestMurmur3Vectors(t *testing.T) {
	for _, v := range murmurVectors {
		if got := Murmur3(v.in, v.seed); got != v.want {
			t.Errorf("Murmur3(%q, %#x) = %#08x, want %#08x", v.in, v.seed, got, v.want)
		}
		if got := Murmur3([]byte(v.in), v.seed); got != v.want {
			t.Errorf("Murmur3([]byte(%q), %#x) = %#08x, want %#08x", v.in, v.seed, got, v.want)
		}
	}
}

// Spot values for keys with multi-byte UTF-8 and every tail length,
// computed with spaolacci/murmur3 v1.1.0 New32WithSeed(104729), the Go
// stream client's hash, outside this repository.
var seedVectors = map[string]uint32{
	"":                       3329588566,
	"a":                      1086686554,
	"ab":                     398604456,
	"abc":                    3409700625,
	"abcd":                   3421720556,
	"abcde":                  3837964174,
	"héllo":                  1190235422,
	"日本語キー":                  3461630501,
	"🌵":                      3491739091,
	"order-17":               1333010316,
	"customer-42":            80594573,
	"x-stream-partition-key": 3260959145,
	"\x00":                   500407381,
	"ÿÿÿ":                    260216014,
}

// slowMurmur3 is a transcription of the algorithm from its description,
// kept structurally apart from Murmur3: it pads the input to whole blocks
// and treats the last block separately.
func slowMurmur3(data []byte, seed uint32) uint32 {
	rotl := func(x uint32, r uint) uint32 { return x<<r | x>>(32-r) }
	mixK := func(k uint32) uint32 { return rotl(k*0xcc9e2d51, 15) * 0x1b873593 }
	h := seed
	full := len(data) / 4
	for b := 0; b < full; b++ {
		h ^= mixK(binary.LittleEndian.Uint32(data[4*b:]))
		h = rotl(h, 13)*5 + 0xe6546b64
	}
	if rest := data[4*full:]; len(rest) > 0 {
		var pad [4]byte
		copy(pad[:], rest)
		h ^= mixK(binary.LittleEndian.Uint32(pad[:]))
	}
	h ^= uint32(len(data))
	for _, step := range []struct {
		shift uint
		mul   uint32
	}{{16, 0x85ebca6b}, {13, 0xc2b2ae35}, {16, 1}} {
		h ^= h >> step.shift
		h *= step.mul
	}
	return h
}

func TestMurmur3AgainstSlow(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		b := make([]byte, r.IntN(70))
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		seed := r.Uint32()
		if i%3 == 0 {
			seed = Seed
		}
		if got, want := Murmur3(b, seed), slowMurmur3(b, seed); got != want {
			t.Fatalf("Murmur3(%x, %d) = %#x, slow reference %#x", b, seed, got, want)
		}
	}
	for _, v := range murmurVectors {
		if got := slowMurmur3([]byte(v.in), v.seed); got != v.want {
			t.Errorf("slow reference wrong on %q: %#x", v.in, got)
		}
	}
}

func TestSeedVectors(t *testing.T) {
	for k, want := range seedVectors {
		if got := Murmur3(k, Seed); got != want {
			t.Errorf("Murmur3(%q, 104729) = %d, want %d", k, got, want)
		}
	}
}

// The routing tables of RabbitMQ's stream clients (Java
// HashRoutingStrategyTest, Go super_stream_producer_test.go; "the same for
// .NET, Python, Java"): partitions invoices-01..03 are 0..2.
func TestKeyPartitionClientTables(t *testing.T) {
	want := map[string]int{
		"hello1": 1, "hello2": 0, "hello3": 1, "hello4": 2, "hello5": 0,
		"hello6": 2, "hello7": 0, "hello8": 1, "hello9": 0, "hello10": 2,
		"hello88": 1,
	}
	for k, p := range want {
		if got := KeyPartition(k, 3); got != p {
			t.Errorf("KeyPartition(%q, 3) = %d, want %d", k, got, p)
		}
	}
	// The Go client's integration test sends hello0..hello19 to a super
	// stream of 3 partitions and expects 9, 7 and 4 messages.
	var counts [3]int
	for i := 0; i < 20; i++ {
		counts[KeyPartition("hello"+itoa(i), 3)]++
	}
	if counts != [3]int{9, 7, 4} {
		t.Errorf("hello0..19 over 3 partitions: %v, want [9 7 4]", counts)
	}
}

func itoa(i int) string { t, _ := KeyText(int64(i)); return t }

// The modulo is unsigned: a hash with the top bit set (negative as a Java
// int) still lands in range, on hash % n of the unsigned value.
func TestKeyPartitionUnsigned(t *testing.T) {
	if h := Murmur3("brave", Seed); h < 1<<31 {
		t.Fatalf("vector no longer exercises the top bit: %#x", h)
	}
	for _, k := range []string{"brave", "new", "world"} {
		h := Murmur3(k, Seed)
		for n := 1; n <= MaxPartitions; n++ {
			if got := KeyPartition(k, n); got != int(h%uint32(n)) || got < 0 || got >= n {
				t.Fatalf("KeyPartition(%q, %d) = %d", k, n, got)
			}
		}
	}
}

func TestKeyText(t *testing.T) {
	ok := []struct {
		v    any
		want string
	}{
		{"abc", "abc"}, {"", ""}, {[]byte("xy"), "xy"},
		{int8(-5), "-5"}, {uint8(200), "200"}, {int16(-300), "-300"}, {uint16(60000), "60000"},
		{int32(42), "42"}, {uint32(4000000000), "4000000000"}, {int64(math.MinInt64), "-9223372036854775808"},
		{uint64(math.MaxUint64), "18446744073709551615"}, {42, "42"},
	}
	for _, c := range ok {
		got, err := KeyText(c.v)
		if err != nil || got != c.want {
			t.Errorf("KeyText(%T %v) = %q, %v; want %q", c.v, c.v, got, err, c.want)
		}
	}
	for _, v := range []any{1.5, float32(2), true, time.Unix(0, 0), map[string]any{}, []any{"a"}} {
		var pe *PartitionError
		if _, err := KeyText(v); !errors.As(err, &pe) || pe.Header != HeaderPartitionKey {
			t.Errorf("KeyText(%T) = %v, want a PartitionError", v, err)
		}
	}
	// A number and its text land together.
	if KeyPartition("12345", 7) != KeyPartition(must(KeyText(int32(12345))), 7) {
		t.Error("int32 12345 and \"12345\" differ")
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func TestRoundRobin(t *testing.T) {
	var rr RoundRobin
	var got []int
	for i := 0; i < 7; i++ {
		got = append(got, rr.Next(3))
	}
	want := []int{0, 1, 2, 0, 1, 2, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("round robin over 3: %v, want %v", got, want)
		}
	}
	var one RoundRobin
	for i := 0; i < 5; i++ {
		if p := one.Next(1); p != 0 {
			t.Fatalf("one partition: %d", p)
		}
	}
}

func TestRoutePrecedence(t *testing.T) {
	keyed := KeyPartition("order-17", 8)
	rkeyed := KeyPartition("eu.orders", 8)
	cases := []struct {
		name    string
		router  Router
		headers map[string]any
		rk      string
		want    int
		rrUsed  bool
		errHdr  string
	}{
		{"explicit wins over key", Router{8, true}, map[string]any{HeaderPartition: int32(5), HeaderPartitionKey: "order-17"}, "eu.orders", 5, false, ""},
		{"explicit long", Router{8, false}, map[string]any{HeaderPartition: int64(7)}, "", 7, false, ""},
		{"explicit byte", Router{8, false}, map[string]any{HeaderPartition: uint8(0)}, "", 0, false, ""},
		{"explicit out of range", Router{8, false}, map[string]any{HeaderPartition: int32(8)}, "", 0, false, HeaderPartition},
		{"explicit negative", Router{8, false}, map[string]any{HeaderPartition: int16(-1)}, "", 0, false, HeaderPartition},
		{"explicit huge unsigned", Router{8, false}, map[string]any{HeaderPartition: uint64(math.MaxUint64)}, "", 0, false, HeaderPartition},
		{"explicit string refused", Router{8, false}, map[string]any{HeaderPartition: "3"}, "", 0, false, HeaderPartition},
		{"explicit out of range even with one partition", Router{1, false}, map[string]any{HeaderPartition: int32(1)}, "", 0, false, HeaderPartition},
		{"void explicit is absent", Router{8, false}, map[string]any{HeaderPartition: nil, HeaderPartitionKey: "order-17"}, "", keyed, false, ""},
		{"key wins over routing key", Router{8, true}, map[string]any{HeaderPartitionKey: "order-17"}, "eu.orders", keyed, false, ""},
		{"numeric key", Router{8, false}, map[string]any{HeaderPartitionKey: int64(17)}, "", KeyPartition("17", 8), false, ""},
		{"float key refused", Router{8, false}, map[string]any{HeaderPartitionKey: 1.5}, "", 0, false, HeaderPartitionKey},
		{"routing key", Router{8, true}, map[string]any{"other": "x"}, "eu.orders", rkeyed, false, ""},
		{"empty routing key hashes too", Router{8, true}, nil, "", KeyPartition("", 8), false, ""},
		{"round robin", Router{8, false}, nil, "eu.orders", 0, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rr RoundRobin
			got, err := c.router.Route(c.headers, c.rk, &rr)
			if c.errHdr != "" {
				var pe *PartitionError
				if !errors.As(err, &pe) || pe.Header != c.errHdr {
					t.Fatalf("Route = %d, %v; want a PartitionError on %s", got, err, c.errHdr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Route = %d, %v; want %d", got, err, c.want)
			}
			if used := rr.n != 0; used != c.rrUsed {
				t.Fatalf("round robin advanced: %v, want %v", used, c.rrUsed)
			}
		})
	}
	if _, err := (Router{}).Route(nil, "", new(RoundRobin)); !errors.Is(err, ErrNoPartitions) {
		t.Errorf("zero router: %v", err)
	}
	var pe *PartitionError
	_, err := Router{4, false}.Route(map[string]any{HeaderPartition: int32(4)}, "", new(RoundRobin))
	if !errors.As(err, &pe) || pe.Error() != "invalid header 'x-stream-partition': partition 4 out of range: the stream has 4 partitions (0..3)" {
		t.Errorf("error text: %v", err)
	}
}

// Keys spread over the partitions: no partition of 16 gets less than half
// or more than twice its share of 16,000 distinct keys.
func TestKeyPartitionSpread(t *testing.T) {
	const n, keys = 16, 16000
	var counts [n]int
	for i := 0; i < keys; i++ {
		counts[KeyPartition("customer-"+itoa(i), n)]++
	}
	for p, c := range counts {
		if c < keys/n/2 || c > 2*keys/n {
			t.Errorf("partition %d got %d of %d keys", p, c, keys)
		}
	}
}
