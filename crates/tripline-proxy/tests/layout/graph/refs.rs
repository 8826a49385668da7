//! The paths one file names: every `use` leaf, path and macro-call token
//! run that starts at `crate`, `self` or `super`, made absolute against
//! the module the visitor is in, and whatever `#[cfg(test)]` items name
//! left out.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// A `use` tree's leaves: the full path, and the name it is bound to.
pub(super) fn flatten(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, String)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((path, n.ident.to_string()));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((path, r.rename.to_string()));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), "*".into())),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| flatten(t, prefix, out)),
    }
}

/// Collects the module paths a file names, already made absolute.
pub(super) struct Refs {
    /// The module the visitor is in: the file's path plus inline `mod`s.
    cur: Vec<String>,
    /// (absolute path, text, line)
    pub(super) found: Vec<(Vec<String>, String, usize)>,
}

impl Refs {
    /// A visitor for the file whose module path is `cur`.
    pub(super) fn new(cur: Vec<String>) -> Self {
        Refs {
            cur,
            found: Vec::new(),
        }
    }

    fn record(&mut self, segments: Vec<String>, text: String, span: Span) {
        let mut abs = match segments.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("self" | "super") => self.cur.clone(),
            _ => return,
        };
        let mut rest = segments
            .iter()
            .skip(usize::from(segments[0] != "super"))
            .peekable();
        while rest.peek().is_some_and(|s| *s == "super") {
            rest.next();
            abs.pop();
        }
        abs.extend(rest.cloned());
        if !abs.is_empty() {
            self.found.push((abs, text, span.start().line));
        }
    }

    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, t) in tokens.iter().enumerate() {
            match t {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if id == "crate" => {
                    let mut path = vec!["crate".to_owned()];
                    let mut j = i + 1;
                    while let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(next)),
                    ) = (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        path.push(next.to_string());
                        j += 3;
                    }
                    if path.len() > 1 {
                        let text = format!("{} (in a macro call)", path.join("::"));
                        self.record(path, text, id.span());
                    }
                }
                _ => {}
            }
        }
    }
}

/// Whether `item` is compiled for unit tests only (`#[cfg(test)]`).
fn test_only(item: &syn::Item) -> bool {
    let attrs = match item {
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        _ => return false,
    };
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string() == "test")
    })
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !test_only(item) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.cur.push(m.ident.to_string());
            visit::visit_item_mod(self, m);
            self.cur.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut leaves = Vec::new();
        flatten(&u.tree, &mut Vec::new(), &mut leaves);
        for (path, _) in leaves {
            let text = format!("use {}", path.join("::"));
            self.record(path, text, u.use_token.span);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() > 1 {
            let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            let span = p.segments[0].ident.span();
            self.record(segments.clone(), segments.join("::"), span);
        }
        visit::visit_path(self, p);
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        visit::visit_macro(self, m);
        self.tokens(m.tokens.clone());
    }
}
