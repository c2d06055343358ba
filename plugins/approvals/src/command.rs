//! A shell command line read as the simple commands it runs, and the patterns rules and grants
//! match them with.
//!
//! A string prefix is no rule: `git -C x checkout -- f` starts with `git -C`, and `ls; rm -rf x`
//! starts with `ls`. So the line is parsed with a real shell grammar (`brush-parser`) into its
//! simple commands (through pipelines, `&&`, `||`, `;`, subshells, brace groups, redirections),
//! each a list of literal words. Whatever cannot be known before it runs — a command or process
//! substitution, a parameter expansion, `eval`, a wrapper that runs another command, a loop — makes
//! the line *opaque*, and an opaque line is never allowed by a rule or a grant: it asks.

use std::fmt;

use brush_parser::ast::{self, Command, CommandPrefixOrSuffixItem, CompoundCommand, IoRedirect};
use brush_parser::word::WordPiece;
use serde::{Deserialize, Serialize};

/// The longest command line analysed; a longer one is opaque.
pub const MAX_COMMAND_BYTES: usize = 64 * 1024;

/// The most `(`, `{` and backticks one line may hold before it is opaque (they bound how deeply
/// the parser recurses).
pub const MAX_OPENERS: usize = 128;

/// The most simple commands one line may hold before it is opaque.
pub const MAX_SIMPLE_COMMANDS: usize = 256;

/// Programs that run another command given as their arguments (or code): a rule on their first
/// word says nothing about what they run.
const RUNS_OTHERS: &[&str] = &[
    ".", "bash", "builtin", "busybox", "chroot", "command", "dash", "doas", "env", "eval", "exec",
    "fish", "ionice", "ksh", "nice", "nohup", "perl", "python", "python3", "ruby", "setsid", "sh",
    "source", "stdbuf", "su", "sudo", "taskset", "time", "timeout", "trap", "unbuffer", "watch",
    "xargs", "zsh", "node",
];

/// Why a command line cannot be read as literal simple commands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Opaque(pub String);

/// One simple command's literal words, the program first.
pub type Words = Vec<String>;

/// One simple command as a rule sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Simple {
    /// Its literal words, the program first.
    pub words: Words,
    /// True when it does something its words do not show: it redirects output into a file
    /// (other than `/dev/null`), or passes an option known to write a file (`--output=FILE`,
    /// `sort -o FILE`), or sets variables for the program (`GIT_CONFIG_*=… git status`,
    /// `LD_PRELOAD=…`), or is only an assignment or a redirection (`PATH=.`, `> file`). An
    /// allow rule or a grant on its words never covers it. This is the second line: what a rule
    /// or grant lets run unasked runs read-only anyway, so an option missing here writes nothing.
    pub beyond_words: bool,
}

/// The simple commands `line` runs, in source order.
///
/// # Errors
/// [`Opaque`] naming the first thing that cannot be known before the line runs.
pub fn simple_commands(line: &str) -> Result<Vec<Simple>, Opaque> {
    if line.len() > MAX_COMMAND_BYTES {
        return Err(Opaque(format!(
            "the command is longer than {MAX_COMMAND_BYTES} bytes"
        )));
    }
    // The parser recurses into every group and substitution: a line of 30,000 `(` would
    // overflow the host's stack. Counting the openers bounds the depth (more count opaque).
    let openers = line
        .bytes()
        .filter(|b| matches!(b, b'(' | b'{' | b'`'))
        .count();
    if openers > MAX_OPENERS {
        return Err(Opaque(format!(
            "it holds more than {MAX_OPENERS} groups, substitutions or expansions"
        )));
    }
    let options = brush_parser::ParserOptions::default();
    let mut parser = brush_parser::Parser::new(std::io::Cursor::new(line), &options);
    let program = parser
        .parse_program()
        .map_err(|e| Opaque(format!("the shell parser cannot read it ({e})")))?;
    let mut out = Vec::new();
    for list in &program.complete_commands {
        compound_list(list, &options, &mut out)?;
    }
    Ok(out)
}

fn compound_list(
    list: &ast::CompoundList,
    options: &brush_parser::ParserOptions,
    out: &mut Vec<Simple>,
) -> Result<(), Opaque> {
    for ast::CompoundListItem(and_or, _) in &list.0 {
        let rest = and_or.additional.iter().map(|a| match a {
            ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
        });
        for pipeline in std::iter::once(&and_or.first).chain(rest) {
            for command in &pipeline.seq {
                self::command(command, options, out)?;
            }
        }
    }
    Ok(())
}

fn command(
    command: &Command,
    options: &brush_parser::ParserOptions,
    out: &mut Vec<Simple>,
) -> Result<(), Opaque> {
    match command {
        Command::Simple(simple) => {
            let words = simple_command(simple, options)?;
            if !words.words.is_empty() || words.beyond_words {
                if out.len() >= MAX_SIMPLE_COMMANDS {
                    return Err(Opaque(format!(
                        "it holds more than {MAX_SIMPLE_COMMANDS} commands"
                    )));
                }
                out.push(words);
            }
            Ok(())
        }
        Command::Compound(compound, redirects) => {
            if let Some(list) = redirects
                && !list.0.is_empty()
            {
                return Err(Opaque(
                    "it redirects a group's output (only a plain command's redirections are read)"
                        .to_owned(),
                ));
            }
            match compound {
                CompoundCommand::BraceGroup(g) => compound_list(&g.list, options, out),
                CompoundCommand::Subshell(s) => compound_list(&s.list, options, out),
                _ => Err(Opaque(
                    "it holds a loop, a condition or arithmetic (only plain commands, pipelines, lists and groups are read)"
                        .to_owned(),
                )),
            }
        }
        Command::Function(_) => Err(Opaque("it defines a function".to_owned())),
        Command::ExtendedTest(..) => Err(Opaque("it holds a [[ … ]] test".to_owned())),
    }
}

fn simple_command(
    simple: &ast::SimpleCommand,
    options: &brush_parser::ParserOptions,
) -> Result<Simple, Opaque> {
    let mut words = Simple {
        words: Vec::new(),
        beyond_words: false,
    };
    let prefix = simple.prefix.iter().flat_map(|p| p.0.iter());
    let suffix = simple.suffix.iter().flat_map(|s| s.0.iter());
    for item in prefix {
        match item {
            CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                // `VAR=value cmd`: the value must be literal, and the variable changes what the
                // program does (git's config, the dynamic loader), so no rule covers it.
                literal(&word.value, options)?;
                words.beyond_words = true;
            }
            other => item_words(other, options, &mut words)?,
        }
    }
    if let Some(name) = &simple.word_or_name {
        words.words.push(program(&name.value, options)?);
    }
    for item in suffix {
        item_words(item, options, &mut words)?;
    }
    if let Some(program) = words.words.first() {
        let base = program.rsplit('/').next().unwrap_or(program);
        let interpreter = INTERPRETERS.iter().any(|i| base.starts_with(i));
        let executes = base == "find"
            && words.words[1..]
                .iter()
                .any(|w| matches!(w.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"));
        if RUNS_OTHERS.contains(&base) || interpreter || executes {
            return Err(Opaque(format!(
                "`{base}` runs another command, which a rule cannot see"
            )));
        }
    }
    if writes_by_option(&words.words) {
        words.beyond_words = true;
    }
    if simple.word_or_name.is_none() && words.words.is_empty() {
        // Only assignments or redirections: it changes the shell (`PATH=.`) or a file.
        words.beyond_words = true;
    }
    Ok(words)
}

fn item_words(
    item: &CommandPrefixOrSuffixItem,
    options: &brush_parser::ParserOptions,
    words: &mut Simple,
) -> Result<(), Opaque> {
    match item {
        CommandPrefixOrSuffixItem::Word(w) => words.words.push(literal(&w.value, options)?),
        CommandPrefixOrSuffixItem::IoRedirect(r) => {
            if redirect(r, options)? {
                words.beyond_words = true;
            }
        }
        CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
            words.words.push(literal(&w.value, options)?);
        }
        CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
            return Err(Opaque("it holds a process substitution".to_owned()));
        }
    }
    Ok(())
}

/// Checks a redirection; true when it writes into a file other than `/dev/null`.
fn redirect(r: &IoRedirect, options: &brush_parser::ParserOptions) -> Result<bool, Opaque> {
    use ast::IoFileRedirectKind as Kind;
    let into_file = |target: &str| target != "/dev/null";
    match r {
        IoRedirect::File(_, kind, target) => {
            let writes = !matches!(kind, Kind::Read | Kind::DuplicateInput);
            match target {
                ast::IoFileRedirectTarget::Filename(w) => {
                    Ok(writes && into_file(&literal(&w.value, options)?))
                }
                ast::IoFileRedirectTarget::Duplicate(w) => {
                    // `>&2`, `2>&-` duplicate or close descriptors; `>& file` writes a file.
                    let target = literal(&w.value, options)?;
                    let descriptor = target == "-"
                        || target
                            .trim_end_matches('-')
                            .chars()
                            .all(|c| c.is_ascii_digit());
                    Ok(writes && !descriptor && into_file(&target))
                }
                ast::IoFileRedirectTarget::Fd(_) => Ok(false),
                ast::IoFileRedirectTarget::ProcessSubstitution(..) => {
                    Err(Opaque("it holds a process substitution".to_owned()))
                }
            }
        }
        IoRedirect::OutputAndError(w, _) => Ok(into_file(&literal(&w.value, options)?)),
        IoRedirect::HereString(_, w) => literal(&w.value, options).map(|_| false),
        IoRedirect::HereDocument(_, doc) => {
            if doc.requires_expansion {
                Err(Opaque(
                    "it holds a here-document that expands its text".to_owned(),
                ))
            } else {
                Ok(false)
            }
        }
    }
}

/// Long options (and every longer option they begin, and their `=value` forms) that make a
/// program write a file: `git diff --output=FILE`, `--out-file`, `--log-file`.
const WRITING_LONG_OPTIONS: &[&str] = &["--out", "--log-file", "--dump", "--save", "--write"];

/// Short options that make one program write a file (as a word of their own, with the value
/// attached, `sort -oFILE`, or in a cluster, `sort -uo FILE`, `curl -sSo FILE`).
const WRITING_SHORT_OPTIONS: &[(&str, &[&str])] = &[
    ("curl", &["-o", "-O", "-D", "-c"]),
    ("git", &["-o"]),
    ("sort", &["-o"]),
    ("wget", &["-o", "-O", "-a"]),
];

/// True when one of `words` (the program first) is an option known to write a file.
fn writes_by_option(words: &[String]) -> bool {
    let Some((program, rest)) = words.split_first() else {
        return false;
    };
    let base = program.rsplit('/').next().unwrap_or(program);
    let short = WRITING_SHORT_OPTIONS
        .iter()
        .find(|(p, _)| *p == base)
        .map_or(&[][..], |(_, o)| *o);
    rest.iter().take_while(|w| w.as_str() != "--").any(|w| {
        let name = w.split('=').next().unwrap_or(w);
        let cluster = w
            .strip_prefix('-')
            .filter(|c| !c.starts_with('-'))
            .unwrap_or_default();
        WRITING_LONG_OPTIONS.iter().any(|o| name.starts_with(o))
            || short
                .iter()
                .filter_map(|o| o.strip_prefix('-'))
                .any(|letter| cluster.contains(letter))
    })
}

/// Interpreters (any version: `python3.12`): their arguments are programs.
const INTERPRETERS: &[&str] = &[
    "python", "perl", "ruby", "node", "php", "lua", "tclsh", "Rscript",
];

/// The program word: literal, and not one the shell would expand into another name (`{rm,-rf,x}`,
/// `/bin/r[m]`).
fn program(word: &str, options: &brush_parser::ParserOptions) -> Result<String, Opaque> {
    let pieces = brush_parser::word::parse(word, options)
        .map_err(|e| Opaque(format!("a word cannot be read ({e})")))?;
    let expands = pieces.iter().any(|p| match &p.piece {
        WordPiece::Text(t) => t.contains(['*', '?', '[', '{']),
        _ => false,
    });
    if expands {
        return Err(Opaque(
            "its program name is a pattern the shell expands".to_owned(),
        ));
    }
    literal(word, options)
}

/// The literal text of a word, or why it has none before the line runs.
fn literal(word: &str, options: &brush_parser::ParserOptions) -> Result<String, Opaque> {
    let pieces = brush_parser::word::parse(word, options)
        .map_err(|e| Opaque(format!("a word cannot be read ({e})")))?;
    let mut out = String::new();
    for p in pieces {
        piece(&p.piece, &mut out)?;
    }
    Ok(out)
}

fn piece(p: &WordPiece, out: &mut String) -> Result<(), Opaque> {
    match p {
        // Brace expansion turns one word into several (`git pu{sh,ll}`): unknown before it runs.
        WordPiece::Text(t) if t.contains('{') && t.contains(',') && t.contains('}') => {
            return Err(Opaque("it holds a brace expansion".to_owned()));
        }
        WordPiece::Text(t) | WordPiece::SingleQuotedText(t) => out.push_str(t),
        WordPiece::EscapeSequence(e) => out.push_str(e.strip_prefix('\\').unwrap_or(e)),
        WordPiece::DoubleQuotedSequence(inner) | WordPiece::GettextDoubleQuotedSequence(inner) => {
            for p in inner {
                piece(&p.piece, out)?;
            }
        }
        WordPiece::AnsiCQuotedText(_) => {
            return Err(Opaque("it holds a $'…' string".to_owned()));
        }
        WordPiece::TildeExpansion(_) => out.push('~'),
        WordPiece::ParameterExpansion(_) => {
            return Err(Opaque(
                "it expands a variable, whose value is known only when it runs".to_owned(),
            ));
        }
        WordPiece::CommandSubstitution(_) | WordPiece::BackquotedCommandSubstitution(_) => {
            return Err(Opaque(
                "it holds a command substitution ($(…) or backticks)".to_owned(),
            ));
        }
        WordPiece::ArithmeticExpression(_) => {
            return Err(Opaque("it holds an arithmetic expansion".to_owned()));
        }
    }
    Ok(())
}

/// A rule or grant on commands: a program and the words that follow it (`git status`,
/// `cargo test`), written as the words separated by spaces.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CommandPattern(Vec<String>);

/// A pattern that has no program.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a command pattern needs at least a program, as in \"git status\"")]
pub struct EmptyPattern;

impl TryFrom<String> for CommandPattern {
    type Error = EmptyPattern;

    fn try_from(text: String) -> Result<Self, EmptyPattern> {
        let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        if words.is_empty() {
            return Err(EmptyPattern);
        }
        Ok(CommandPattern(words))
    }
}

impl From<CommandPattern> for String {
    fn from(p: CommandPattern) -> String {
        p.to_string()
    }
}

impl fmt::Display for CommandPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(" "))
    }
}

/// Options of `git` that come before its subcommand and take the next word as their value.
const GIT_VALUE_OPTIONS: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--exec-path",
];

impl CommandPattern {
    /// The pattern's words.
    pub fn words(&self) -> &[String] {
        &self.0
    }

    /// Allows `words` when they begin with exactly the pattern's words (`git status` allows
    /// `git status --short`, not `git -c x status` nor `/tmp/git status`): matching less is the
    /// safe side of an allow.
    pub fn allows(&self, words: &[String]) -> bool {
        words.len() >= self.0.len() && words[..self.0.len()] == self.0[..]
    }

    /// Denies `words` when its program's file name is the pattern's program and the rest of the
    /// pattern appears, in order, among the words that are not options (`git push` denies
    /// `/usr/bin/git -C x push origin`): matching more is the safe side of a deny.
    pub fn denies(&self, words: &[String]) -> bool {
        let Some((program, rest)) = words.split_first() else {
            return false;
        };
        let base = program.rsplit('/').next().unwrap_or(program);
        if base != self.0[0] {
            return false;
        }
        let mut wanted = self.0[1..].iter().peekable();
        for word in positional(base, rest) {
            if wanted.peek().is_some_and(|w| *w == word) {
                let _ = wanted.next();
            }
        }
        wanted.peek().is_none()
    }

    /// The command key of `words`: the program's file name and its subcommand, with the options
    /// before the subcommand (and their values) skipped (`git -C x checkout -- f` is
    /// `git checkout`).
    pub fn key_of(words: &[String]) -> Option<CommandPattern> {
        let (program, rest) = words.split_first()?;
        let base = program.rsplit('/').next().unwrap_or(program).to_owned();
        let mut key = vec![base.clone()];
        if let Some(sub) = positional(&base, rest).next() {
            key.push(sub.clone());
        }
        Some(CommandPattern(key))
    }

    /// Allows exactly `words` (a whole-command grant).
    pub fn is(&self, words: &[String]) -> bool {
        self.0[..] == *words
    }

    /// What "always allow" grants for the approved simple command `words`, and whether it is
    /// exact: for a program known to have subcommands (`git`, `cargo`, …) the program and its
    /// subcommand as a prefix (`git status`, `cargo test`); otherwise the whole command, matched
    /// exactly, so that approving `rm -rf build` never allows `rm -rf build ~`.
    pub fn grant_for(words: &[String]) -> Option<(CommandPattern, bool)> {
        let program = words.first()?;
        let is_subcommand = |w: &String| {
            w.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                && w.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        match words.get(1) {
            Some(sub) if SUBCOMMAND_PROGRAMS.contains(&program.as_str()) && is_subcommand(sub) => {
                Some((CommandPattern(vec![program.clone(), sub.clone()]), false))
            }
            _ if words
                .iter()
                .all(|w| !w.is_empty() && !w.contains(char::is_whitespace)) =>
            {
                Some((CommandPattern(words.to_vec()), true))
            }
            _ => None,
        }
    }
}

/// Programs whose second word is a subcommand, so that a grant may cover it with any arguments.
const SUBCOMMAND_PROGRAMS: &[&str] = &[
    "bun", "cargo", "deno", "gh", "git", "go", "just", "kubectl", "make", "npm", "pip", "pnpm",
    "poetry", "rustup", "uv", "yarn",
];

/// The words of a command after its program that are not options, skipping the values of the
/// options `program` is known to take before its subcommand.
fn positional<'a>(program: &str, rest: &'a [String]) -> impl Iterator<Item = &'a String> {
    let value_options: &[&str] = if program == "git" {
        GIT_VALUE_OPTIONS
    } else {
        &[]
    };
    let mut skip_next = false;
    rest.iter().filter(move |w| {
        if std::mem::take(&mut skip_next) {
            return false;
        }
        if w.starts_with('-') {
            skip_next = value_options.contains(&w.as_str());
            return false;
        }
        true
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        simple_commands(line)
            .unwrap_or_else(|e| panic!("{line}: {e}"))
            .into_iter()
            .map(|s| s.words)
            .collect()
    }

    #[test]
    fn a_command_that_writes_a_file_is_marked() {
        let writes = |line: &str| -> Vec<bool> {
            simple_commands(line)
                .unwrap()
                .into_iter()
                .map(|s| s.beyond_words)
                .collect()
        };
        assert_eq!(writes("git status > ~/.bashrc"), [true]);
        assert_eq!(writes("git status >> log; git diff &> out"), [true, true]);
        assert_eq!(writes("git status >& out"), [true]);
        assert_eq!(writes("git status 2>&1 >/dev/null < in"), [false]);
        assert_eq!(writes("git status 2>/dev/null | cat"), [false, false]);
        assert!(simple_commands("{ git status; } > out").is_err());
        assert_eq!(
            writes("GIT_CONFIG_COUNT=1 git status"),
            [true],
            "a variable for git"
        );
        assert_eq!(
            writes("PATH=.; git status"),
            [true, false],
            "an assignment alone"
        );
        assert_eq!(
            writes("> ~/.bashrc; git status"),
            [true, false],
            "a redirection alone"
        );
        assert_eq!(writes("find . -name '*.rs'"), [false]);
        // Options that write a file, whatever their spelling.
        for line in [
            "git diff --output=important.txt",
            "git log --output .git/config",
            "git diff --output-indicator-new=x --stat",
            "git format-patch -o out HEAD~1",
            "sort -o sorted.txt in.txt",
            "sort -osorted.txt in.txt",
            "curl -O https://example.com/x",
            "curl -sSo out.html https://example.com/x",
            "sort -uo sorted.txt in.txt",
            "wget -qO page.html https://example.com/x",
            "cargo build --out-dir x",
        ] {
            assert_eq!(writes(line), [true], "{line}");
        }
        for line in [
            "git diff --stat",
            "grep -o x f",
            "git log -- --output",
            "ls --all",
        ] {
            assert_eq!(writes(line), [false], "{line}");
        }
    }

    fn pattern(text: &str) -> CommandPattern {
        CommandPattern::try_from(text.to_owned()).unwrap()
    }

    #[test]
    fn a_line_splits_into_its_simple_commands_through_lists_pipes_and_groups() {
        assert_eq!(
            words("ls -la; rm -rf x && (cd a && make) | tee 'out log' > f 2>&1"),
            [
                vec!["ls", "-la"],
                vec!["rm", "-rf", "x"],
                vec!["cd", "a"],
                vec!["make"],
                vec!["tee", "out log"],
            ]
        );
        assert_eq!(
            words("FOO=1 git \"status\" --short"),
            [vec!["git", "status", "--short"]]
        );
        assert_eq!(
            words("{ echo a; echo b\\ c; }"),
            [vec!["echo", "a"], vec!["echo", "b c"]]
        );
    }

    #[test]
    fn substitutions_expansions_and_wrappers_are_opaque() {
        for line in [
            "echo $(rm -rf x)",
            "echo `id`",
            "$CMD status",
            "git push $REMOTE",
            "cat <(ls)",
            "eval 'git push'",
            "bash -c 'git push'",
            "sudo git push",
            "env X=1 git push",
            "xargs rm < list",
            "for f in a; do rm $f; done",
            "f() { git push; }",
            "echo \"$(git push)\"",
            "if true; then git push; fi",
            "echo 'unterminated",
            "{rm,-rf,x}",
            "/bin/r[m] -rf x",
            "git pu{sh,ll}",
            "python3.12 -c 'import os'",
            "find . -exec rm {} +",
        ] {
            assert!(simple_commands(line).is_err(), "{line} must be opaque");
        }
        let long = "a".repeat(MAX_COMMAND_BYTES + 1);
        assert!(simple_commands(&long).is_err());
        // Deep nesting is refused before the parser recurses (it used to overflow the stack).
        let deep = format!("{}true{}", "(".repeat(30_000), ")".repeat(30_000));
        assert!(simple_commands(&deep).is_err());
    }

    #[test]
    fn git_options_before_the_subcommand_do_not_hide_it() {
        let cmd = &words("git -C x checkout -- f")[0];
        assert_eq!(CommandPattern::key_of(cmd), Some(pattern("git checkout")));
        assert!(pattern("git checkout").denies(cmd));
        assert!(pattern("git push").denies(&words("/usr/bin/git -c a=b push origin")[0]));
        assert!(!pattern("git push").denies(&words("git status")[0]));
        assert!(!pattern("git push").denies(&words("echo git push")[0]));
        assert!(pattern("rm").denies(&words("rm -rf x")[0]));
    }

    #[test]
    fn an_allow_matches_only_the_exact_leading_words() {
        let allow = pattern("git status");
        assert!(allow.allows(&words("git status --short")[0]));
        assert!(!allow.allows(&words("git -c core.pager=x status")[0]));
        assert!(!allow.allows(&words("./git status")[0]));
        assert!(!allow.allows(&words("git")[0]));
    }

    #[test]
    fn a_grant_covers_a_subcommand_or_else_the_whole_command() {
        let grant = |line: &str| {
            CommandPattern::grant_for(&words(line)[0]).map(|(p, exact)| (p.to_string(), exact))
        };
        let prefix = |p: &str| Some((p.to_owned(), false));
        let exact = |p: &str| Some((p.to_owned(), true));
        assert_eq!(grant("git status --short"), prefix("git status"));
        assert_eq!(grant("cargo test -p x"), prefix("cargo test"));
        assert_eq!(grant("rm -rf build"), exact("rm -rf build"));
        assert_eq!(
            grant("rm build"),
            exact("rm build"),
            "rm has no subcommands"
        );
        assert_eq!(grant("ls"), exact("ls"));
        assert_eq!(grant("./run.sh go"), exact("./run.sh go"));
        assert_eq!(
            grant("echo 'a b'"),
            None,
            "a word with a space cannot be a pattern"
        );
    }

    #[test]
    fn patterns_read_and_print_as_space_separated_words() {
        let p: CommandPattern = serde_json::from_str("\"git  status\"").unwrap();
        assert_eq!(p.words(), ["git", "status"]);
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"git status\"");
        assert!(serde_json::from_str::<CommandPattern>("\"  \"").is_err());
    }
}
