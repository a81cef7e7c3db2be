//! A walk over clang's JSON AST (`-Xclang -ast-dump=json`) collecting the facts the rules
//! need, for nodes located in the user's files only. With the prelude precompiled, the dump
//! holds little besides the user's declarations.
//!
//! clang prints a location's `file` and `line` only when they change from the previous
//! location printed, so the walk visits locations in print order (loc, range begin, range
//! end, then children) and carries the last file and line along.

use std::rc::Rc;

use crate::json::{Reader, Value};

#[derive(Clone, Debug, Default)]
pub struct Loc {
    /// Shared: a dump has hundreds of thousands of locations in a handful of files.
    pub file: Rc<str>,
    pub line: u32,
    pub col: u32,
}

#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    /// The type as written (`uint3`, `TA`): what messages and attribute rules name.
    pub ty: String,
    /// The type with aliases and typedefs looked through (`__global float *` for
    /// `ptr<device float>`): what address-space rules read.
    pub desugared: String,
    pub loc: Loc,
}

#[derive(Clone, Debug)]
pub struct Function {
    pub id: String,
    pub name: String,
    pub loc: Loc,
    /// Start of the declaration (after any leading attributes, which clang drops).
    pub begin: Loc,
    pub end: Loc,
    pub params: Vec<Param>,
    /// The return type as written (`void`, `T`) and with aliases looked through.
    pub ret: String,
    pub ret_desugared: String,
}

#[derive(Clone, Debug)]
pub enum Fact {
    Lambda(Loc),
    /// A call from the function `from` (canonical id) to `to`, at `loc`.
    Call {
        from: String,
        to: String,
        to_name: String,
        loc: Loc,
    },
    /// A class with a base class: (location, class name, base type, base is virtual).
    Base(Loc, String, String, bool),
    /// A type spelled with a function pointer or reference.
    FunctionPointer(Loc, String),
    /// A conversion between address spaces (castKind AddressSpaceConversion): location,
    /// source and destination types, as written (for messages) and desugared (for the rule:
    /// an alias such as `ptr<device float>` hides the space in its argument list); `exempt`
    /// when it only feeds an implicit copy or move member (Metal gives those to every space).
    AddressSpaceCast {
        loc: Loc,
        from: String,
        to: String,
        from_desugared: String,
        to_desugared: String,
        exempt: bool,
    },
    /// A variable or field declared `threadgroup` (rewrite 3 of rewrite.rs, found by its
    /// initializer): (location, name, enclosing function id).
    ThreadgroupVar(Loc, String, Option<String>),
    /// A kernel defined in a macro's body (rewrite 9 of rewrite.rs): its id.
    MacroKernel(String),
    /// An attribute written in the source (clang's kind, `ConstructorAttr`), at its location.
    Attr(Loc, String),
    /// Inline assembly: an `asm` statement or a file-scope `asm` declaration.
    Asm(Loc),
    /// A cast that may turn a pointer into an integer or the reverse (clang's cast kind
    /// `PointerToIntegral`, `IntegralToPointer`, `BitCast`, `LValueBitCast` or a
    /// `__builtin_bit_cast`), with its operand's and result's types, as written and desugared.
    PointerCast {
        loc: Loc,
        cast_kind: String,
        from: String,
        to: String,
        from_desugared: String,
        to_desugared: String,
    },
    /// A union and the desugared types of its fields.
    Union(Loc, String, Vec<String>),
    /// An implicit conversion between bfloat (`_Float16` to clang) and another floating type
    /// than float (`float` to `bfloat`, `bfloat` to `half`), with the types as written. Integer
    /// conversions are left alone: real kernels (mistral.rs) multiply bfloat by int.
    BfloatConversion { loc: Loc, from: String, to: String },
    /// A `static` variable in the constant address space inside a function: (location, name).
    StaticConstantLocal(Loc, String),
    /// A variable at namespace scope: (location, name, desugared type).
    GlobalVar(Loc, String, String),
    /// A memory order other than relaxed passed to an atomic function: (location, function,
    /// order).
    MemoryOrder(Loc, String, String),
    /// `atomic<T>` of an element type Metal has no atomics of: (location, the element type).
    AtomicType(Loc, String),
    /// A variable, parameter or C-style cast of a pointer type, outside templates (whose `T*`
    /// may carry its space in `T`): where its type is written (from `begin` to the name at
    /// `name`, or the cast's parentheses), and the function it is in.
    PointerType { begin: Loc, name: Option<Loc>, func: Option<String> },
}

/// A declaration of a function, or of an `extern` variable, in the user's files.
#[derive(Clone, Debug)]
pub struct Decl {
    pub id: String,
    /// The declaration it redeclares (clang's `previousDecl`).
    pub previous: Option<String>,
    pub name: String,
    pub loc: Loc,
    /// It has a body (or `= delete`, `= default`, an initializer: nothing to link).
    pub defined: bool,
    /// Made by instantiating a template, not written: a member of an implicit class template
    /// specialization has no body until it is used, which is no fault of the source.
    pub instantiated: bool,
    /// A variable (`extern T x;`), not a function.
    pub variable: bool,
    /// A specialization a function template lists: the id of the template's pattern, and
    /// whether the source wrote it elsewhere (an explicit specialization, which the template
    /// lists by reference, without a location) rather than clang making it from the pattern.
    pub specializes: Option<(String, bool)>,
}

pub struct Ast {
    pub functions: Vec<Function>,
    pub facts: Vec<Fact>,
    pub decls: Vec<Decl>,
    /// Redeclaration id -> first declaration id.
    canon: std::collections::HashMap<String, String>,
}

impl Ast {
    pub fn canonical(&self, id: &str) -> String {
        let mut cur = id.to_string();
        for _ in 0..64 {
            match self.canon.get(&cur) {
                Some(p) if *p != cur => cur = p.clone(),
                _ => break,
            }
        }
        cur
    }
}

struct Walker<'a> {
    last_file: Rc<str>,
    last_line: u32,
    in_user: &'a dyn Fn(&str) -> bool,
    functions: Vec<Function>,
    facts: Vec<Fact>,
    decls: Vec<Decl>,
    canon: std::collections::HashMap<String, String>,
    /// The methods and constructors the dump declares, by id: whether clang declared it
    /// implicitly (copy and move constructors and assignments).
    implicit: std::collections::HashMap<String, bool>,
    /// Inside a template instantiation clang made (not the source's own declarations).
    instantiating: u32,
    /// Inside a template: its pattern or an instantiation.
    templated: u32,
    /// The pattern's id while a function template's specialization is walked.
    specializing: Option<String>,
}

fn implicit_members(v: &Value, out: &mut std::collections::HashMap<String, bool>) {
    // (a declaration has a range; a reference to one, as a call's callee, has none)
    if v.get("range").is_some() && matches!(s(v, "kind"), "CXXMethodDecl" | "CXXConstructorDecl") {
        out.insert(s(v, "id").to_string(), v.get("isImplicit").and_then(Value::as_bool).unwrap_or(false));
    }
    if let Some(inner) = v.get("inner").and_then(Value::as_array) {
        for c in inner {
            implicit_members(c, out);
        }
    }
}

/// Whether a call node calls an implicit copy or move member: an operator whose callee is
/// implicit, or a construction, or an assignment the dump does not declare, whose member's type
/// reads like an implicit copy or move (one reference parameter, noexcept: what clang gives the
/// ones it declares; the class of a template the precompiled prelude declares, `float4x4`, is
/// not in the dump, so neither are its implicit members).
fn calls_implicit_member(n: &Value, implicit: &std::collections::HashMap<String, bool>) -> bool {
    let implicit_copy_type = |ty: &str| ty.ends_with("noexcept") && (ty.contains("&)") || ty.contains("&&)")) && one_parameter(ty);
    let declared_implicit = |id: &String| implicit.get(id) == Some(&true);
    match s(n, "kind") {
        "CXXOperatorCallExpr" => match callee(n) {
            Some((id, name)) if name == "operator=" && !implicit.contains_key(&id) => callee_type(n).is_some_and(implicit_copy_type),
            called => called.is_some_and(|(id, _)| declared_implicit(&id)),
        },
        "CXXMemberCallExpr" => callee(n).is_some_and(|(id, _)| declared_implicit(&id)),
        "CXXConstructExpr" => implicit_copy_type(n.get("ctorType").map(|t| s(t, "qualType")).unwrap_or("")),
        _ => false,
    }
}

/// The type of the function a call's callee expression names (`X &(const X &) noexcept`).
fn callee_type<'v>(n: &'v Value) -> Option<&'v str> {
    let mut cur = n.get("inner")?.as_array()?.first()?;
    for _ in 0..8 {
        if let Some(d) = cur.get("referencedDecl") {
            return d.get("type").map(|t| s(t, "qualType"));
        }
        cur = cur.get("inner")?.as_array()?.first()?;
    }
    None
}

/// Whether a function type's parameter list (`void (const S<float, 4> &) noexcept`) has one
/// parameter: no comma outside template arguments and parentheses.
fn one_parameter(function_type: &str) -> bool {
    let Some(open) = function_type.find('(') else { return false };
    let mut depth = 0i32;
    for c in function_type[open + 1..].chars() {
        match c {
            '<' | '(' => depth += 1,
            '>' => depth -= 1,
            ')' if depth == 0 => return true,
            ')' => depth -= 1,
            ',' if depth == 0 => return false,
            _ => {}
        }
    }
    false
}

/// Parse and walk a dump. Recursive, once per level of the AST: the caller runs it on a stack
/// that holds json::MAX_DEPTH levels (`crate::deep_stack`). The translation unit, namespaces and
/// templates are read child by child ([`STREAMED`]): what is in memory at once is one
/// declaration's tree (one function, one class, one instantiation), not the unit's, whose
/// instantiations can print gigabytes (MLX's reduce.metal).
pub fn parse(json: &str, in_user: &dyn Fn(&str) -> bool) -> Result<Ast, String> {
    let mut w = Walker {
        last_file: Rc::from(""),
        last_line: 0,
        in_user,
        functions: Vec::new(),
        facts: Vec::new(),
        decls: Vec::new(),
        canon: Default::default(),
        implicit: implicit_member_ids(json),
        instantiating: 0,
        templated: 0,
        specializing: None,
    };
    let mut r = Reader::new(json);
    w.stream(&mut r, None, None).map_err(|e| format!("clang's AST dump did not parse: {e}"))?;
    if !r.finished() {
        return Err("clang's AST dump did not parse: trailing characters".into());
    }
    Ok(Ast { functions: w.functions, facts: w.facts, decls: w.decls, canon: w.canon })
}

/// Whether a function template's child `kind` (id `id`) is one of its specializations: the
/// first function is its pattern (its id kept in `pattern`), the others specializations, whose
/// pattern `specializing` then names.
fn specialization(kind: &str, id: &str, pattern: &mut Option<String>, specializing: &mut Option<String>) -> bool {
    if !FUNCTION_KINDS.contains(&kind) {
        return false;
    }
    if pattern.is_none() {
        *pattern = Some(id.to_string());
        return false;
    }
    *specializing = pattern.clone();
    true
}

/// Declarations whose children are read one at a time: they hold a unit's declarations, and a
/// template its instantiations.
const STREAMED: [&str; 6] =
    ["TranslationUnitDecl", "NamespaceDecl", "LinkageSpecDecl", "FunctionTemplateDecl", "ClassTemplateDecl", "VarTemplateDecl"];

/// The members the dump declares, and whether clang declared each implicitly (copy and move
/// constructors and assignments), found in the text before the walk: a use may come before its class in the
/// dump (an instantiation prints under its template).
fn implicit_member_ids(json: &str) -> std::collections::HashMap<String, bool> {
    let mut out = std::collections::HashMap::new();
    for kind in ["CXXMethodDecl", "CXXConstructorDecl"] {
        for pattern in [format!("\"kind\":\"{kind}\""), format!("\"kind\": \"{kind}\"")] {
            for (at, _) in json.match_indices(&pattern) {
                // the object opens just before its id, which clang prints first
                let Some(open) = json[at.saturating_sub(200)..at].rfind('{').map(|o| o + at.saturating_sub(200)) else { continue };
                if let Ok((fields, _)) = Reader::at(json, open).head() {
                    let v = Value::Object(fields);
                    implicit_members(&v, &mut out);
                }
            }
        }
    }
    out
}

fn s<'v>(v: &'v Value, k: &str) -> &'v str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn qual_type(v: &Value) -> String {
    v.get("type").map(|t| s(t, "qualType").to_string()).unwrap_or_default()
}

/// A function type's return type: the text before its parameter list (`void (int)`).
fn return_type(function_type: &str) -> String {
    function_type.split('(').next().unwrap_or("").trim().to_string()
}

/// The type with typedefs looked through (clang gives it when it differs).
fn desugared(v: &Value) -> String {
    v.get("type")
        .map(|t| t.get("desugaredQualType").and_then(Value::as_str).unwrap_or(s(t, "qualType")).to_string())
        .unwrap_or_default()
}

impl Walker<'_> {
    /// Walk the node at the reader: streamed ([`STREAMED`]) or parsed whole. `parent`: the
    /// template it is a child of, and whether that template's pattern was seen.
    fn stream(&mut self, r: &mut Reader, func: Option<&str>, parent: Option<(&str, &mut Option<String>)>) -> Result<(), String> {
        if !r.at_object() {
            return r.value().map(|_| ());
        }
        let (fields, has_inner) = r.head()?;
        let kind = fields.iter().find(|(k, _)| *k == "kind").and_then(|(_, v)| v.as_str()).unwrap_or("").to_string();
        // A function template's first function is its pattern, the others are the
        // instantiations clang made; a class template's specializations listed inside it are
        // its implicit instantiations (explicit ones are declared where written).
        let outer = self.specializing.take();
        let made = match parent {
            Some(("FunctionTemplateDecl", pattern)) => {
                let id = fields.iter().find(|(k, _)| *k == "id").and_then(|(_, v)| v.as_str()).unwrap_or("");
                specialization(&kind, id, pattern, &mut self.specializing)
            }
            Some(_) => matches!(kind.as_str(), "ClassTemplateSpecializationDecl" | "VarTemplateSpecializationDecl"),
            None => false,
        };
        self.instantiating += made as u32;
        let walked = if has_inner && STREAMED.contains(&kind.as_str()) {
            let head = Value::Object(fields);
            self.enter(&head);
            let template = kind.ends_with("TemplateDecl");
            self.templated += template as u32;
            let mut pattern = None;
            let mut first = true;
            let mut walked = Ok(());
            while walked.is_ok() {
                match r.next_child(first) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => walked = Err(e),
                }
                if walked.is_err() {
                    break;
                }
                first = false;
                walked = self.stream(r, func, template.then_some((kind.as_str(), &mut pattern)));
            }
            self.templated -= template as u32;
            walked
        } else {
            let v = if has_inner { r.rest(fields)? } else { Value::Object(fields) };
            self.node(&v, func, false);
            Ok(())
        };
        self.instantiating -= made as u32;
        self.specializing = outer;
        walked
    }

    /// A streamed declaration's own locations (read in print order, as `node` reads them) and
    /// redeclaration link.
    fn enter(&mut self, n: &Value) {
        self.loc(n.get("loc"));
        let range = n.get("range");
        self.loc(range.and_then(|r| r.get("begin")));
        self.loc(range.and_then(|r| r.get("end")));
        if let Some(prev) = n.get("previousDecl").and_then(Value::as_str) {
            self.canon.insert(s(n, "id").to_string(), prev.to_string());
        }
    }

    /// Read one bare location, updating the carried file and line.
    fn bare(&mut self, l: &Value) -> Loc {
        if let Some(f) = l.get("file").and_then(Value::as_str)
            && &*self.last_file != f
        {
            self.last_file = Rc::from(f);
        }
        if let Some(n) = l.get("line").and_then(Value::as_u64) {
            self.last_line = n as u32;
        }
        Loc {
            file: self.last_file.clone(),
            line: self.last_line,
            col: l.get("col").and_then(Value::as_u64).unwrap_or(0) as u32,
        }
    }

    /// A location that may be a macro expansion: the expansion location is where the user's
    /// code is (both halves are read, in print order, to keep the carried state right).
    fn loc(&mut self, l: Option<&Value>) -> Loc {
        let Some(l) = l else { return Loc { file: self.last_file.clone(), line: self.last_line, col: 0 } };
        if l.get("spellingLoc").is_some() || l.get("expansionLoc").is_some() {
            if let Some(sp) = l.get("spellingLoc") {
                self.bare(sp);
            }
            return match l.get("expansionLoc") {
                Some(e) => self.bare(e),
                None => Loc::default(),
            };
        }
        if l.get("col").is_none() && l.get("offset").is_none() {
            return Loc { file: self.last_file.clone(), line: self.last_line, col: 0 };
        }
        self.bare(l)
    }

    /// `exempt`: this node is an operand of an implicit copy or move member.
    fn node(&mut self, n: &Value, func: Option<&str>, exempt: bool) {
        let kind = s(n, "kind");
        let loc = self.loc(n.get("loc"));
        let range = n.get("range");
        let begin = self.loc(range.and_then(|r| r.get("begin")));
        let end = self.loc(range.and_then(|r| r.get("end")));
        let id = s(n, "id").to_string();
        if let Some(prev) = n.get("previousDecl").and_then(Value::as_str) {
            self.canon.insert(id.clone(), prev.to_string());
        }
        let user = (self.in_user)(&loc.file) && !n.get("isImplicit").and_then(Value::as_bool).unwrap_or(false);
        let mut inner_func = func.map(str::to_string);
        if kind == "CStyleCastExpr" && user && self.templated == 0 && desugared(n).contains('*') {
            self.facts.push(Fact::PointerType { begin: begin.clone(), name: None, func: func.map(str::to_string) });
        }
        match kind {
            "FunctionDecl" | "CXXMethodDecl" | "CXXConstructorDecl" | "CXXDestructorDecl" | "CXXConversionDecl" => {
                let inner = n.get("inner").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
                inner_func = Some(id.clone());
                // (taken: a function declared in this one's body specializes nothing)
                let specializes = self.specializing.take().map(|p| (p, n.get("loc").is_none()));
                // Parameters are read in the child walk (their locations come in order).
                let mut f = Function {
                    id: id.clone(),
                    name: s(n, "name").to_string(),
                    loc: loc.clone(),
                    begin,
                    end,
                    params: Vec::new(),
                    ret: return_type(&qual_type(n)),
                    ret_desugared: return_type(&desugared(n)),
                };
                for c in inner {
                    if s(c, "kind") == "ParmVarDecl" {
                        let ploc = self.loc(c.get("loc"));
                        let r = c.get("range");
                        let pbegin = self.loc(r.and_then(|r| r.get("begin")));
                        self.loc(r.and_then(|r| r.get("end")));
                        if user && self.templated == 0 && desugared(c).contains('*') {
                            self.facts.push(Fact::PointerType { begin: pbegin, name: Some(ploc.clone()), func: Some(id.clone()) });
                        }
                        f.params.push(Param {
                            name: s(c, "name").to_string(),
                            ty: qual_type(c),
                            desugared: desugared(c),
                            loc: ploc.clone(),
                        });
                        if user {
                            self.check_type(&ploc, &desugared(c));
                        }
                        self.children(c, inner_func.as_deref(), false);
                    } else {
                        self.node(c, inner_func.as_deref(), false);
                    }
                }
                if user {
                    self.check_type(&loc, qual_type(n).split('(').next().unwrap_or(""));
                    let defined = inner.iter().any(|c| matches!(s(c, "kind"), "CompoundStmt" | "CXXTryStmt"))
                        || n.get("explicitlyDeleted").and_then(Value::as_bool).unwrap_or(false)
                        || n.get("explicitlyDefaulted").is_some()
                        || n.get("pure").and_then(Value::as_bool).unwrap_or(false);
                    self.decls.push(Decl {
                        id: id.clone(),
                        previous: n.get("previousDecl").and_then(Value::as_str).map(str::to_string),
                        name: f.name.clone(),
                        loc: loc.clone(),
                        defined,
                        instantiated: self.instantiating > 0,
                        variable: false,
                        specializes,
                    });
                    self.functions.push(f);
                }
                return;
            }
            // A function template's first function is its pattern, the others are the
            // instantiations clang made; a class template's specializations listed inside it
            // are its implicit instantiations (explicit ones are declared where written).
            "FunctionTemplateDecl" | "ClassTemplateDecl" | "VarTemplateDecl" => {
                let mut pattern = None;
                self.templated += 1;
                for c in n.get("inner").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]) {
                    let k = s(c, "kind");
                    let outer = self.specializing.take();
                    let made = match kind {
                        "FunctionTemplateDecl" => specialization(k, s(c, "id"), &mut pattern, &mut self.specializing),
                        _ => matches!(k, "ClassTemplateSpecializationDecl" | "VarTemplateSpecializationDecl"),
                    };
                    self.instantiating += made as u32;
                    self.node(c, inner_func.as_deref(), false);
                    self.instantiating -= made as u32;
                    self.specializing = outer;
                }
                self.templated -= 1;
                return;
            }
            "LambdaExpr" if user => self.facts.push(Fact::Lambda(loc.clone())),
            // Attributes carry no `loc`: where they are is their range. Implicit ones (clang's
            // own) and inherited ones (from an earlier declaration) are not written here.
            k if k.ends_with("Attr")
                && (self.in_user)(&begin.file)
                && !n.get("implicit").and_then(Value::as_bool).unwrap_or(false)
                && !n.get("inherited").and_then(Value::as_bool).unwrap_or(false) =>
            {
                self.facts.push(Fact::Attr(begin.clone(), k.to_string()));
            }
            "GCCAsmStmt" | "MSAsmStmt" | "FileScopeAsmDecl" if user || (self.in_user)(&begin.file) => {
                self.facts.push(Fact::Asm(begin.clone()));
            }
            "BuiltinBitCastExpr" if user => self.facts.push(pointer_cast(n, &begin, "__builtin_bit_cast")),
            "CXXRecordDecl" | "RecordDecl" | "ClassTemplateSpecializationDecl"
                if user && s(n, "tagUsed") == "union" && n.get("completeDefinition").and_then(Value::as_bool).unwrap_or(false) =>
            {
                let fields = n
                    .get("inner")
                    .and_then(Value::as_array)
                    .map(|i| i.iter().filter(|c| s(c, "kind") == "FieldDecl").map(desugared).collect())
                    .unwrap_or_default();
                self.facts.push(Fact::Union(loc.clone(), s(n, "name").to_string(), fields));
            }
            "CXXRecordDecl" if user => {
                for b in n.get("bases").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]) {
                    let ty = b.get("type").map(|t| s(t, "qualType").to_string()).unwrap_or_default();
                    let virt = b.get("isVirtual").and_then(Value::as_bool).unwrap_or(false);
                    self.facts.push(Fact::Base(loc.clone(), s(n, "name").to_string(), ty, virt));
                }
            }
            "CallExpr" | "CXXMemberCallExpr" | "CXXOperatorCallExpr" if user => {
                let called = callee(n);
                if let Some((_, name)) = &called
                    && name.starts_with("atomic_")
                    && name.ends_with("_explicit")
                {
                    for order in memory_orders(n) {
                        self.facts.push(Fact::MemoryOrder(begin.clone(), name.clone(), order));
                    }
                }
                if let (Some(from), Some((to, name))) = (func, called) {
                    self.facts.push(Fact::Call { from: from.to_string(), to, to_name: name, loc: begin.clone() });
                }
            }
            // (clang spells an explicit cast's conversion as an implicit cast under it)
            "ImplicitCastExpr"
                if user
                    && !n.get("isPartOfExplicitCast").and_then(Value::as_bool).unwrap_or(false)
                    && s(n, "castKind") == "FloatingCast" =>
            {
                let operand = n.get("inner").and_then(Value::as_array).and_then(|i| i.first());
                let (from_d, to_d) = (operand.map(desugared).unwrap_or_default(), desugared(n));
                // bfloat to float is the one implicit conversion Metal gives bfloat
                let to_float = is_bfloat(&from_d) && strip_quals(&to_d) == "float";
                // (a `double` is an unsuffixed literal in a template to clang: float in Metal)
                let double = strip_quals(&from_d) == "double" || strip_quals(&to_d) == "double";
                if is_bfloat(&from_d) != is_bfloat(&to_d) && !to_float && !double {
                    let from = operand.map(qual_type).unwrap_or_default();
                    self.facts.push(Fact::BfloatConversion { loc: begin.clone(), from, to: qual_type(n) });
                }
            }
            "CStyleCastExpr"
            | "CXXStaticCastExpr"
            | "CXXReinterpretCastExpr"
            | "CXXFunctionalCastExpr"
            | "ImplicitCastExpr"
                if user && s(n, "castKind") == "AddressSpaceConversion" =>
            {
                let operand = n.get("inner").and_then(Value::as_array).and_then(|i| i.first());
                self.facts.push(Fact::AddressSpaceCast {
                    loc: begin.clone(),
                    from: operand.map(qual_type).unwrap_or_default(),
                    to: qual_type(n),
                    from_desugared: operand.map(desugared).unwrap_or_default(),
                    to_desugared: desugared(n),
                    exempt,
                });
            }
            "CStyleCastExpr"
            | "CXXStaticCastExpr"
            | "CXXReinterpretCastExpr"
            | "CXXFunctionalCastExpr"
            | "ImplicitCastExpr"
                if user
                    && matches!(s(n, "castKind"), "PointerToIntegral" | "IntegralToPointer" | "BitCast" | "LValueBitCast") =>
            {
                self.facts.push(pointer_cast(n, &begin, s(n, "castKind")));
            }
            // Variables and fields (and, above, parameters and returns) hold run-time values;
            // a function pointer type in a typedef or a template parameter is a compile-time
            // device MLX's fft.h uses, which Metal accepts.
            "VarDecl" | "FieldDecl" if user => {
                self.check_type(&loc, &desugared(n));
                // an `extern` variable, or a later declaration (the definition) of one
                let external = s(n, "storageClass") == "extern";
                if kind == "VarDecl" && (external || n.get("previousDecl").is_some()) {
                    self.decls.push(Decl {
                        id: id.clone(),
                        previous: n.get("previousDecl").and_then(Value::as_str).map(str::to_string),
                        name: s(n, "name").to_string(),
                        loc: loc.clone(),
                        defined: !external || n.get("init").is_some(),
                        instantiated: self.instantiating > 0,
                        variable: true,
                        specializes: None,
                    });
                }
                if kind == "VarDecl" && self.templated == 0 && desugared(n).contains('*') {
                    self.facts.push(Fact::PointerType { begin: begin.clone(), name: Some(loc.clone()), func: func.map(str::to_string) });
                }
                if threadgroup_allocation(n) {
                    self.facts.push(Fact::ThreadgroupVar(loc.clone(), s(n, "name").to_string(), func.map(str::to_string)));
                }
                if kind == "VarDecl"
                    && s(n, "name") == crate::rewrite::MACRO_KERNEL_MARKER
                    && let Some(f) = func
                {
                    self.facts.push(Fact::MacroKernel(f.to_string()));
                }
                if kind == "VarDecl" {
                    let ty = desugared(n);
                    if func.is_some() && s(n, "storageClass") == "static" && ty.split(['*', '&', '<']).next().unwrap_or("").contains("__constant") {
                        self.facts.push(Fact::StaticConstantLocal(loc.clone(), s(n, "name").to_string()));
                    }
                    if func.is_none() {
                        self.facts.push(Fact::GlobalVar(loc.clone(), s(n, "name").to_string(), ty));
                    }
                }
            }
            _ => {}
        }
        let exempt_children = calls_implicit_member(n, &self.implicit);
        self.children(n, inner_func.as_deref(), exempt_children);
    }

    fn children(&mut self, n: &Value, func: Option<&str>, exempt: bool) {
        if let Some(inner) = n.get("inner").and_then(Value::as_array) {
            for c in inner {
                self.node(c, func, exempt);
            }
        }
    }

    fn check_type(&mut self, loc: &Loc, ty: &str) {
        // `void (*)(int)`, `int (&)(float)`: a parenthesised declarator followed by a parameter
        // list (not `float (&)[4]`, a reference to an array).
        let b = ty.as_bytes();
        let fnptr = (0..b.len().saturating_sub(1)).any(|j| {
            b[j] == b')' && b[j + 1] == b'(' && ty[..j].rfind('(').is_some_and(|o| ty[o + 1..j].contains(['*', '&']))
        });
        if fnptr {
            self.facts.push(Fact::FunctionPointer(loc.clone(), ty.to_string()));
        }
        // `atomic<T>` (desugared: `atomic<half>`, `metal::atomic<_Float16>`)
        let mut rest = ty;
        while let Some(at) = rest.find("atomic<") {
            let word_start = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric() && rest.as_bytes()[at - 1] != b'_';
            let args = &rest[at + "atomic<".len()..];
            let element = args.split('>').next().unwrap_or("").trim();
            let vector = element.contains("ext_vector_type") || element.ends_with(|c: char| c.is_ascii_digit()) && !element.ends_with("_t");
            if word_start && (NOT_ATOMIC_ELEMENTS.contains(&element) || vector) {
                self.facts.push(Fact::AtomicType(loc.clone(), element.to_string()));
            }
            rest = args;
        }
    }
}

/// The kinds of function declarations.
const FUNCTION_KINDS: [&str; 5] = ["FunctionDecl", "CXXMethodDecl", "CXXConstructorDecl", "CXXDestructorDecl", "CXXConversionDecl"];

/// Element types Metal has no atomics of (it has int, uint, bool, float and 64-bit ulong: MSL
/// 2.6), as clang spells them desugared or as typedefs; a vector is not one either.
const NOT_ATOMIC_ELEMENTS: [&str; 19] = [
    "half", "_Float16", "bfloat", "bfloat16_t", "float16_t", "char", "signed char", "unsigned char", "uchar", "short",
    "unsigned short", "ushort", "int8_t", "uint8_t", "int16_t", "uint16_t", "double", "long long", "unsigned long long",
];

/// Whether a desugared type is bfloat or a vector of it (clang's `_Float16` here).
fn is_bfloat(ty: &str) -> bool {
    let t = strip_quals(ty);
    t == "_Float16" || t.starts_with("_Float16 __attribute__((ext_vector_type")
}

/// A type's spelling without its leading cv-qualifiers and address space.
fn strip_quals(ty: &str) -> &str {
    let mut t = ty.trim();
    loop {
        let next = ["const ", "volatile ", "__private ", "__generic ", "__global ", "__constant ", "__local "]
            .iter()
            .find_map(|q| t.strip_prefix(q));
        match next {
            Some(rest) => t = rest.trim_start(),
            None => return t,
        }
    }
}

/// The memory orders other than relaxed among a call's arguments (`memory_order_acquire`),
/// named directly (through implicit casts).
fn memory_orders(call: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for arg in call.get("inner").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]).iter().skip(1) {
        let mut cur = arg;
        for _ in 0..4 {
            if s(cur, "kind") == "DeclRefExpr" {
                if let Some(d) = cur.get("referencedDecl")
                    && s(d, "kind") == "EnumConstantDecl"
                    && s(d, "name").starts_with("memory_order_")
                    && s(d, "name") != "memory_order_relaxed"
                {
                    out.push(s(d, "name").to_string());
                }
                break;
            }
            match cur.get("inner").and_then(Value::as_array).and_then(|i| i.first()) {
                Some(next) => cur = next,
                None => break,
            }
        }
    }
    out
}

/// A cast's [`Fact::PointerCast`]: its operand's and result's types.
fn pointer_cast(n: &Value, loc: &Loc, cast_kind: &str) -> Fact {
    let operand = n.get("inner").and_then(Value::as_array).and_then(|i| i.first());
    Fact::PointerCast {
        loc: loc.clone(),
        cast_kind: cast_kind.to_string(),
        from: operand.map(qual_type).unwrap_or_default(),
        to: qual_type(n),
        from_desugared: operand.map(desugared).unwrap_or_default(),
        to_desugared: desugared(n),
    }
}

/// Whether a variable or field is initialized by a call of `__kgmsl_threadgroup_alloc`, the
/// declaration rewrite 3 (rewrite.rs) makes of `threadgroup T x[N];`: resolved, or in a template
/// (an unresolved lookup) where its type depends on a parameter.
fn threadgroup_allocation(decl: &Value) -> bool {
    const ALLOC: &str = "__kgmsl_threadgroup_alloc";
    let inner = decl.get("inner").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    inner.iter().filter(|c| s(c, "kind") == "CallExpr").any(|call| {
        let unresolved = call.get("inner").and_then(Value::as_array).and_then(|i| i.first());
        callee(call).is_some_and(|(_, name)| name == ALLOC)
            || unresolved.is_some_and(|u| s(u, "kind") == "UnresolvedLookupExpr" && s(u, "name") == ALLOC)
    })
}

/// The function a call expression calls, from the DeclRefExpr/MemberExpr under it.
fn callee(n: &Value) -> Option<(String, String)> {
    let first = n.get("inner")?.as_array()?.first()?;
    let mut cur = first;
    for _ in 0..8 {
        if let Some(d) = cur.get("referencedDecl").or_else(|| cur.get("referencedMemberDecl").map(|_| cur)) {
            if s(cur, "kind") == "MemberExpr" {
                let id = s(cur, "referencedMemberDecl").to_string();
                return Some((id, s(cur, "name").to_string()));
            }
            if matches!(s(d, "kind"), "FunctionDecl" | "CXXMethodDecl") {
                return Some((s(d, "id").to_string(), s(d, "name").to_string()));
            }
            return None;
        }
        cur = cur.get("inner")?.as_array()?.first()?;
    }
    None
}
