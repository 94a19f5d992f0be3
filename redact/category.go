package redact

import (
	"fmt"

	"github.com/tenantmcp/tenantmcp/redact/internal/detect"
)

// Category is a kind of personal data or secret. Struct fields name their
// category in a `pii:"…"` tag; the free-text detectors report the categories
// email, phone, card, iban, ssn, ip and secret.
type Category string

// The categories. Name and Address are only ever known from tags: there is
// no reliable detector for a person's name or postal address in free text,
// so such fields must be tagged.
const (
	Email   Category = "email"
	Phone   Category = "phone"
	Name    Category = "name"
	Card    Category = "card"
	Address Category = "address"
	IBAN    Category = "iban"
	SSN     Category = "ssn"
	IP      Category = "ip"
	// Secret is always dropped: no policy reveals it and no operator other
	// than Drop applies. Detected JWTs, bearer tokens, API keys, passwords and
	// private keys are reported as Secret.
	Secret Category = "secret"
)

// catIndex is the dense index of a category, for arrays indexed by category.
type catIndex uint8

const (
	ciEmail catIndex = iota
	ciPhone
	ciName
	ciCard
	ciAddress
	ciIBAN
	ciSSN
	ciIP
	ciSecret
	nCat
)

var catNames = [nCat]Category{Email, Phone, Name, Card, Address, IBAN, SSN, IP, Secret}

// placeholders are precomputed "[redacted:<category>]" strings.
var placeholders [nCat]string

func init() {
	for i, c := range catNames {
		placeholders[i] = "[redacted:" + string(c) + "]"
	}
}

// Categories returns every category, in a fixed order.
func Categories() []Category {
	out := make([]Category, nCat)
	copy(out, catNames[:])
	return out
}

func indexOf(c Category) (catIndex, bool) {
	for i, n := range catNames {
		if n == c {
			return catIndex(i), true
		}
	}
	return 0, false
}

// kindCat maps a detector kind to its category.
var kindCat = [...]catIndex{
	detect.Secret: ciSecret,
	detect.Card:   ciCard,
	detect.IBAN:   ciIBAN,
	detect.SSN:    ciSSN,
	detect.Email:  ciEmail,
	detect.Phone:  ciPhone,
	detect.IP:     ciIP,
}

// Operator says how a category is redacted when the caller may not see it.
type Operator uint8

const (
	// Mask replaces the value with a placeholder that keeps a safe hint:
	// the domain of an e-mail address ("***@example.com"), the last four
	// digits of a phone number ("***0143") or card ("****1111"), the
	// country and last four characters of an IBAN ("DE**3000"). Categories
	// without a safe hint (name, address, ssn, ip) become
	// "[redacted:<category>]". Mask is the default for every category but
	// Secret.
	Mask Operator = iota + 1
	// Drop removes the value: a tagged struct field is omitted from the
	// output, a detected span in free text becomes "[redacted:<category>]".
	Drop
	// Token replaces the value with a keyed token,
	// "tok_<category>_<24 base32 characters>": HMAC-SHA256 under a key
	// derived for the caller's tenant, so equal values give equal tokens
	// within a tenant (a model can still join on them) and tokens of
	// different tenants are unlinkable. Requires Options.TokenKey.
	Token
)

func (o Operator) String() string {
	switch o {
	case Mask:
		return "mask"
	case Drop:
		return "drop"
	case Token:
		return "token"
	}
	return fmt.Sprintf("Operator(%d)", uint8(o))
}

// action is what one redaction pass does with one category. The zero value
// is the most restrictive, so a zeroed table drops everything.
type action uint8

const (
	actDrop action = iota
	actMask
	actToken
	actReveal
)

type actions [nCat]action
