//! Finding and reading skills: the folders, the precedence, the bounds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cordis_instructions::{Place, Reader};
use cordis_workspace::Workspace;

use crate::config::SkillsConfig;
use crate::skill::{MAX_DESCRIPTION, parse, valid_name};

/// The workspace's skills folder, relative to its root.
pub const WORKSPACE_SKILLS: &str = ".agents/skills";
/// What a `SKILL.md` may hold besides its body (front matter), read past `maxBodyBytes`.
const FRONT_MATTER_ALLOWANCE: usize = 16 << 10;
/// How many distinct warnings one entry prints.
const MAX_WARNINGS: usize = 256;

/// Where a skill comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    /// The user's own folder.
    User,
    /// The workspace's `.agents/skills/`.
    Workspace,
}

/// One skill that parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name (its folder's).
    pub name: String,
    /// Its description, on one line, at most [`MAX_DESCRIPTION`] characters.
    pub description: String,
    /// Its body, at most `maxBodyBytes` (a cut body ends with a line saying so).
    pub body: String,
    /// Its file as shown (`.agents/skills/x/SKILL.md`, `~/.config/cordis/skills/x/SKILL.md`).
    pub shown: String,
    /// Where it comes from.
    pub origin: Origin,
}

/// The skills of one entry: where to look, and what was read.
#[derive(Debug)]
pub struct Library {
    ws: Option<Workspace>,
    user: Option<(PathBuf, String)>,
    config: SkillsConfig,
    reader: Reader,
    warned: Mutex<BTreeSet<String>>,
}

fn one_line(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let line = words.join(" ");
    match line.char_indices().nth(MAX_DESCRIPTION) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// The folder names under `dir`, sorted; `None` when it does not exist or cannot be listed.
/// Inside a run's [`Snapshot`](cordis_instructions::Snapshot), listed once per snapshot.
fn folders(dir: &Path) -> Option<Vec<String>> {
    cordis_instructions::snapshot::once(
        || cordis_instructions::snapshot::Key::new("folders").path(dir),
        || list_folders(dir),
    )
}

/// [`folders`], listed now.
fn list_folders(dir: &Path) -> Option<Vec<String>> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    Some(names)
}

impl Library {
    /// A library reading the workspace's skills under `ws` and the user's under `user` (the
    /// cordis config directory and how it is shown).
    pub fn new(
        ws: Option<Workspace>,
        user: Option<(PathBuf, String)>,
        config: SkillsConfig,
    ) -> Self {
        Library {
            ws,
            user,
            config,
            reader: Reader::new(),
            warned: Mutex::default(),
        }
    }

    fn warn(&self, message: String) {
        let mut warned = cordis_runtime::lock(&self.warned);
        if warned.len() < MAX_WARNINGS && warned.insert(message.clone()) {
            tracing::warn!("{message}");
        }
    }

    /// Every skill, sorted by name (see the crate docs for precedence and bounds). Blocks on
    /// file I/O: a directory listing per place and an open and `fstat` per skill when nothing
    /// changed.
    pub fn scan(&self) -> Vec<Arc<Skill>> {
        let mut found: BTreeMap<String, Arc<Skill>> = BTreeMap::new();
        if let Some((dir, shown)) = &self.user {
            let skills = dir.join("skills");
            let place = |name: &str| Place::Outside {
                path: skills.join(name).join("SKILL.md"),
                within: None,
            };
            self.scan_one(
                &skills,
                &format!("{shown}/skills"),
                Origin::User,
                place,
                &mut found,
            );
        }
        if let Some(ws) = &self.ws {
            let skills = ws.root().join(WORKSPACE_SKILLS);
            let place = |name: &str| {
                Place::Workspace(Path::new(WORKSPACE_SKILLS).join(name).join("SKILL.md"))
            };
            self.scan_one(
                &skills,
                WORKSPACE_SKILLS,
                Origin::Workspace,
                place,
                &mut found,
            );
        }
        found.into_values().collect()
    }

    fn scan_one(
        &self,
        dir: &Path,
        shown_dir: &str,
        origin: Origin,
        place: impl Fn(&str) -> Place,
        found: &mut BTreeMap<String, Arc<Skill>>,
    ) {
        let Some(names) = folders(dir) else {
            return;
        };
        if names.len() > self.config.max_skills {
            self.warn(format!(
                "skills: {shown_dir} holds {} entries; only the first {} by name are read (skills maxSkills)",
                names.len(),
                self.config.max_skills
            ));
        }
        for folder in names.iter().take(self.config.max_skills) {
            let shown = format!("{shown_dir}/{folder}/SKILL.md");
            let Some(skill) = self.load(&place(folder), folder, &shown, origin) else {
                continue;
            };
            if let Some(kept) = found.get(&skill.name) {
                self.warn(format!(
                    "skills: {shown}: the skill {:?} of {} takes precedence; left out",
                    skill.name, kept.shown
                ));
                continue;
            }
            found.insert(skill.name.clone(), Arc::new(skill));
        }
    }

    fn load(&self, place: &Place, folder: &str, shown: &str, origin: Origin) -> Option<Skill> {
        let max = self.config.max_body_bytes;
        let loaded = match self
            .reader
            .read(self.ws.as_ref(), place, max + FRONT_MATTER_ALLOWANCE)
        {
            Ok(Some(loaded)) => loaded,
            // A folder without a SKILL.md (or a stray file): not a skill.
            Ok(None) | Err(cordis_instructions::FileError::NotAFile { kind: "directory" }) => {
                return None;
            }
            Err(e) => {
                self.warn(format!("skills: {shown}: {e}"));
                return None;
            }
        };
        let (front, mut body) = match parse(&loaded.text) {
            Ok(parsed) => parsed,
            Err(e) => {
                self.warn(format!(
                    "skills: {shown}:{}: {}; left out",
                    e.line, e.message
                ));
                return None;
            }
        };
        if front.name != folder || !valid_name(folder) {
            self.warn(format!(
                "skills: {shown}:2: the name {:?} differs from its folder {folder:?}; left out",
                front.name
            ));
            return None;
        }
        if loaded.cut || body.len() > max {
            let mut end = max.min(body.len());
            while !body.is_char_boundary(end) {
                end -= 1;
            }
            body.truncate(end);
            body.push_str(&format!(
                "\n\n[{shown} is {} bytes; its body was cut after {max} bytes (skills maxBodyBytes)]",
                loaded.size
            ));
        }
        Some(Skill {
            name: front.name,
            description: one_line(&front.description),
            body,
            shown: shown.to_owned(),
            origin,
        })
    }

    /// The catalog section's text: empty without skills.
    pub fn catalog(&self) -> String {
        catalog(&self.scan(), self.config.max_catalog_bytes)
    }

    /// The skill named `name`, read now.
    pub fn get(&self, name: &str) -> Option<Arc<Skill>> {
        self.scan().into_iter().find(|s| s.name == name)
    }
}

/// The catalog of `skills` within `max` bytes of lines.
pub(crate) fn catalog(skills: &[Arc<Skill>], max: usize) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "Skills: instructions for particular tasks. Before you do a task a skill describes, read the skill with the `skill` tool (pass its name) and follow it.\n",
    );
    let mut used = 0;
    for (i, skill) in skills.iter().enumerate() {
        let line = format!("\n- {}: {}", skill.name, skill.description);
        if used + line.len() > max {
            text.push_str(&format!(
                "\n- … and {} more skills, not listed (skills maxCatalogBytes)",
                skills.len() - i
            ));
            break;
        }
        used += line.len();
        text.push_str(&line);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("SKILL.md"), text).unwrap();
    }

    fn skill(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\nBody of {name}.\n")
    }

    fn library(ws: &Path, user: Option<&Path>, config: SkillsConfig) -> Library {
        let ws = Workspace::open(ws).unwrap();
        Library::new(
            Some(ws),
            user.map(|u| (u.to_path_buf(), "~/.config/cordis".to_owned())),
            config,
        )
    }

    #[test]
    fn skills_are_sorted_by_name_and_the_users_win_a_shared_name() {
        let tmp = tempfile::tempdir().unwrap();
        let (ws, user) = (tmp.path().join("ws"), tmp.path().join("user"));
        let wskills = ws.join(WORKSPACE_SKILLS);
        write(&wskills, "zeta", &skill("zeta", "Last."));
        write(
            &wskills,
            "alpha",
            &skill("alpha", "First,\n  on two lines."),
        );
        write(&wskills, "shared", &skill("shared", "From the workspace."));
        write(
            &user.join("skills"),
            "shared",
            &skill("shared", "The user's."),
        );
        let lib = library(&ws, Some(&user), SkillsConfig::default());
        let got: Vec<(String, String, Origin)> = lib
            .scan()
            .iter()
            .map(|s| (s.name.clone(), s.description.clone(), s.origin))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "alpha".into(),
                    "First, on two lines.".into(),
                    Origin::Workspace
                ),
                ("shared".into(), "The user's.".into(), Origin::User),
                ("zeta".into(), "Last.".into(), Origin::Workspace),
            ]
        );
        assert_eq!(lib.get("zeta").unwrap().body, "Body of zeta.\n");
        assert!(
            lib.catalog()
                .ends_with("\n- alpha: First, on two lines.\n- shared: The user's.\n- zeta: Last.")
        );
    }

    #[test]
    fn a_malformed_skill_is_left_out_and_the_others_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let wskills = tmp.path().join(WORKSPACE_SKILLS);
        write(&wskills, "good", &skill("good", "Fine."));
        write(&wskills, "bad", "---\nname: bad\ndescription: [oops\n---\n");
        write(&wskills, "renamed", &skill("other", "Wrong folder."));
        std::fs::create_dir_all(wskills.join("empty")).unwrap();
        let lib = library(tmp.path(), None, SkillsConfig::default());
        let names: Vec<String> = lib.scan().iter().map(|s| s.name.clone()).collect();
        assert_eq!(names, ["good"]);
        let warned = cordis_runtime::lock(&lib.warned).clone();
        assert!(
            warned
                .iter()
                .any(|w| w.starts_with("skills: .agents/skills/bad/SKILL.md:3: ")),
            "{warned:?}"
        );
        assert!(
            warned.iter().any(|w| w.contains("renamed/SKILL.md:2")),
            "{warned:?}"
        );
    }

    #[test]
    fn bounds_hold_for_count_body_and_catalog() {
        let tmp = tempfile::tempdir().unwrap();
        let wskills = tmp.path().join(WORKSPACE_SKILLS);
        for i in 0..5 {
            write(
                &wskills,
                &format!("s{i}"),
                &skill(&format!("s{i}"), "A skill."),
            );
        }
        let long = format!(
            "---\nname: s0\ndescription: Long.\n---\n{}",
            "é".repeat(100)
        );
        write(&wskills, "s0", &long);
        let config = SkillsConfig {
            max_skills: 3,
            max_body_bytes: 11,
            max_catalog_bytes: 30,
            user: false,
        };
        let lib = library(tmp.path(), None, config);
        let skills = lib.scan();
        assert_eq!(skills.len(), 3, "only the first three folders are read");
        assert!(
            skills[0].body.starts_with("ééééé\n\n["),
            "{}",
            skills[0].body
        );
        assert!(skills[0].body.contains("cut after 11 bytes"));
        let catalog = lib.catalog();
        assert!(catalog.contains("- s0: Long.\n- s1: A skill."), "{catalog}");
        assert!(catalog.ends_with("- … and 1 more skills, not listed (skills maxCatalogBytes)"));
    }

    #[test]
    fn a_symlinked_skill_leaving_the_workspace_is_left_out() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let wskills = ws.join(WORKSPACE_SKILLS);
        write(
            &tmp.path().join("elsewhere"),
            "out",
            &skill("out", "Outside."),
        );
        std::fs::create_dir_all(&wskills).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("elsewhere/out"), wskills.join("out")).unwrap();
        let lib = library(&ws, None, SkillsConfig::default());
        assert!(lib.scan().is_empty());
        let warned = cordis_runtime::lock(&lib.warned).clone();
        assert!(
            warned
                .iter()
                .any(|w| w.contains("out/SKILL.md") && w.contains("leaves")),
            "{warned:?}"
        );
    }
}
