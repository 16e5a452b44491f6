package triage

// The tables below stand in for the services a real triage agent would
// call: a language detector, a translation service, a classifier, a
// knowledge base and a customer database. They keep the example offline and
// its runs reproducible.

// commonWords are frequent words per language, for detect_language.
var commonWords = map[string][]string{
	"en": {"the", "and", "is", "my", "i", "to", "for", "you", "was", "it", "of", "can", "please"},
	"es": {"el", "la", "los", "las", "de", "que", "y", "mi", "por", "para", "es", "una", "no", "me", "han", "dos"},
	"fr": {"le", "la", "les", "de", "et", "je", "mon", "ma", "est", "pour", "une", "pas", "ne", "deux"},
}

// glossaries translate single words into English, for translate. An empty
// translation drops the word ("mot de passe" -> "password de").
var glossaries = map[string]map[string]string{
	"es": {
		"factura": "invoice", "cobrado": "charged", "cobro": "charge", "dos": "two", "veces": "times",
		"reembolso": "refund", "contraseña": "password", "cuenta": "account", "error": "error",
		"urgente": "urgent", "abogado": "lawyer", "suscripción": "subscription", "mi": "my",
		"me": "me", "han": "have", "por": "for", "favor": "please", "la": "the", "el": "the",
		"de": "of", "y": "and", "no": "not", "puedo": "can", "iniciar": "log", "sesión": "in",
	},
	"fr": {
		"facture": "invoice", "débité": "charged", "deux": "two", "fois": "times",
		"remboursement": "refund", "mot": "password", "passe": "", "connecter": "login", "compte": "account",
		"erreur": "error", "urgent": "urgent", "avocat": "lawyer", "abonnement": "subscription",
		"mon": "my", "ma": "my", "je": "i", "été": "been", "ai": "have", "le": "the", "la": "the",
	},
}

// categories are classify's keyword rules, in order of precedence on ties.
var categories = []struct {
	name     string
	keywords []string
}{
	{"legal", []string{"lawyer", "legal", "lawsuit", "court", "gdpr", "sue"}},
	{"billing", []string{"invoice", "charge", "charged", "refund", "payment", "subscription", "twice", "price"}},
	{"account", []string{"password", "login", "log", "email", "username", "account", "delete"}},
	{"technical", []string{"error", "crash", "crashes", "bug", "slow", "broken", "timeout", "500"}},
}

// urgentWords raise a ticket's priority.
var urgentWords = []string{"urgent", "asap", "immediately", "outage", "down"}

// sectionsFor lists the knowledge-base sections worth searching for a
// category. It never returns an empty list: a fan-out of zero tasks would
// never satisfy the join into draft_reply.
func sectionsFor(category string) []string {
	switch category {
	case "billing":
		return []string{"billing/refunds", "billing/invoices", "billing/plans"}
	case "account":
		return []string{"account/access", "account/settings"}
	case "technical":
		return []string{"technical/errors", "technical/performance", "general/status"}
	}
	return []string{"general/faq"}
}

type article struct {
	title    string
	keywords []string
	answer   string
}

// knowledgeBase holds the help-centre articles, by section.
var knowledgeBase = map[string][]article{
	"billing/refunds": {
		{"Duplicate charges", []string{"twice", "duplicate", "charged", "refund", "two"},
			"I am sorry you were charged twice: the duplicate payment has been flagged and will be refunded to your card within 5 business days."},
		{"Refund policy", []string{"refund", "cancel", "money"},
			"You can request a refund within 30 days of any payment from Settings > Billing."},
	},
	"billing/invoices": {
		{"Finding your invoices", []string{"invoice", "receipt", "download", "vat"},
			"All invoices can be downloaded from Settings > Billing > Invoices."},
	},
	"billing/plans": {
		{"Changing plans", []string{"upgrade", "downgrade", "plan", "price", "subscription"},
			"You can change plans at any time; the difference is prorated on your next invoice."},
	},
	"account/access": {
		{"Resetting your password", []string{"password", "reset", "forgot", "login", "log"},
			"You can reset your password from the sign-in page with the \"Forgot password?\" link."},
	},
	"account/settings": {
		{"Changing your email address", []string{"email", "address", "change"},
			"You can change your email address in Settings > Profile; we will send a confirmation link."},
	},
	"technical/errors": {
		{"Error 500 when saving", []string{"error", "500", "saving", "save"},
			"Error 500 on save is a known issue fixed in version 4.2; please update the app."},
	},
	"technical/performance": {
		{"The app is slow", []string{"slow", "timeout", "loading"},
			"Clearing the cache from Settings > Advanced usually restores normal speed."},
	},
	"general/status": {
		{"Service status", []string{"down", "outage", "status"},
			"You can follow incidents live at status.example.com."},
	},
	"general/faq": {
		{"Contacting support", []string{"contact", "phone", "hours"},
			"Our team answers tickets every day from 8:00 to 20:00 CET."},
	},
}

// customers is the customer database, by email address.
var customers = map[string]Customer{
	"ana@example.com":   {Name: "Ana", Plan: "pro"},
	"bruno@example.com": {Name: "Bruno", Plan: "enterprise"},
	"chen@example.com":  {Name: "Chen", Plan: "free"},
}
