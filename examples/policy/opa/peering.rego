# netpeer's peering rules over an OpenTofu/Terraform plan (`tofu show -json PLANFILE`), the same three
# as the CrossGuard pack in ../pulumi:
#   - netpeer-peer-namespace-allow-list: a peering's remote namespace is on the allow-list
#     (settings.allowed_namespaces); a peering inside its own namespace is always allowed;
#   - netpeer-peering-description: every peering has a non-blank description;
#   - netpeer-cross-site-label: a peering to another site (remote_site set) carries the label
#     "<label>: <value>" in its description (settings.cross_site_label, default "cross-site-approved").
# Only what the plan creates or changes is judged (a replace is a create); deletions and untouched
# resources are not. A value not known until apply is not judged either.
#
#   opa eval -f pretty -d peering.rego -d settings.json -i plan.json data.netpeer.peering.deny
#
# gives the violations, one string each: "<rule>: <resource address>: <why>". Empty: the plan passes.
package netpeer.peering

# The settings: data.netpeer_settings (e.g. settings.json beside this file), over these defaults.
defaults := {"allowed_namespaces": [], "cross_site_label": "cross-site-approved"}

default configured := {}

configured := data.netpeer_settings

settings := object.union(defaults, configured)

# The peerings the plan creates or updates, with the values they will have.
peerings contains {"address": rc.address, "after": rc.change.after} if {
	some rc in input.resource_changes
	rc.type == "netpeer_peering"
	some action in rc.change.actions
	action in {"create", "update"}
}

deny contains msg if {
	some p in peerings
	remote := p.after.remote_namespace
	is_string(remote)
	remote != ""
	remote != object.get(p.after, "namespace", "")
	not remote in settings.allowed_namespaces
	allowed := concat(", ", settings.allowed_namespaces)
	msg := sprintf(
		"netpeer-peer-namespace-allow-list: %s: peers with namespace %q, which is not on the allow-list (%s)",
		[p.address, remote, allowed],
	)
}

deny contains msg if {
	some p in peerings
	not described(p.after)
	msg := sprintf("netpeer-peering-description: %s: has no description: say why the two networks are peered", [p.address])
}

deny contains msg if {
	some p in peerings
	site := object.get(p.after, "remote_site", "")
	is_string(site)
	site != ""
	not labelled(p.after)
	msg := sprintf(
		"netpeer-cross-site-label: %s: reaches site %q without the label '%s: VALUE' in its description",
		[p.address, site, settings.cross_site_label],
	)
}

described(after) if {
	trim_space(object.get(after, "description", "")) != ""
}

# An unknown description (known only at apply) is not judged.
described(after) if {
	not "description" in object.keys(after)
}

# "label: value" with a non-blank value, not part of a longer word ("my-cross-site-approved:" is not it).
labelled(after) if {
	regex.match(sprintf(`(^|[^\w-])%s:\s*\S`, [regex_quote(settings.cross_site_label)]), object.get(after, "description", ""))
}

regex_quote(s) := regex.replace(s, `([.\-+*?()\[\]{}|^$\\])`, `\$1`)
