//! The classification table of the crate docs, row by row.

use devcheck_classify::{
    ContainerKind, FieldClass, MapKey, classify_derive_input, classify_field, classify_type, type_to_string,
};

fn describe(ty: syn::Type) -> String {
    classify_type(&ty).describe()
}

fn field(tokens: proc_macro2::TokenStream) -> devcheck_classify::ClassifiedField {
    let input: syn::DeriveInput = syn::parse_quote!(struct S { #tokens });
    match input.data {
        syn::Data::Struct(s) => classify_field(s.fields.iter().next().expect("one field")),
        _ => unreachable!("a struct was parsed"),
    }
}

fn messages(f: &devcheck_classify::ClassifiedField) -> Vec<String> {
    f.errors.iter().map(|e| e.message.clone()).collect()
}

#[test]
fn tensors_params_and_submodules() {
    assert_eq!(describe(syn::parse_quote!(Param)), "parameter");
    assert_eq!(describe(syn::parse_quote!(devcheck::module::Param)), "parameter");
    assert_eq!(describe(syn::parse_quote!(Tensor)), "buffer");
    assert_eq!(describe(syn::parse_quote!(::devcheck::Tensor)), "buffer");
    assert_eq!(describe(syn::parse_quote!(Encoder)), "submodule");
    assert_eq!(describe(syn::parse_quote!(M)), "submodule");
    assert_eq!(describe(syn::parse_quote!(Block<M>)), "submodule");
    assert_eq!(describe(syn::parse_quote!(Box<dyn Layer>)), "boxed submodule");
    assert_eq!(describe(syn::parse_quote!(<B as Backend>::Layer)), "submodule");
}

#[test]
fn containers_nest_and_name_their_element() {
    assert_eq!(describe(syn::parse_quote!(Vec<Block>)), "vec of submodules");
    assert_eq!(describe(syn::parse_quote!(Option<Linear>)), "optional submodule");
    assert_eq!(describe(syn::parse_quote!([Tensor; 4])), "array of 4 buffers");
    assert_eq!(describe(syn::parse_quote!(BTreeMap<String, Param>)), "map of parameters");
    assert_eq!(describe(syn::parse_quote!(Vec<Option<Tensor>>)), "vec of optional buffer");
    match classify_type(&syn::parse_quote!(std::collections::BTreeMap<usize, Vec<Tensor>>)) {
        FieldClass::Container { kind: ContainerKind::BTreeMap { key: MapKey::Integer }, element } => {
            assert!(matches!(
                *element,
                FieldClass::Container { kind: ContainerKind::Vec, ref element } if matches!(**element, FieldClass::Buffer)
            ));
        }
        other => panic!("not a map of vecs: {other:?}"),
    }
    assert!(matches!(
        classify_type(&syn::parse_quote!(BTreeMap<&'static str, Tensor>)),
        FieldClass::Container { kind: ContainerKind::BTreeMap { key: MapKey::String }, .. }
    ));
}

#[test]
fn plain_data_is_left_alone() {
    for ty in [
        quote::quote!(f32),
        quote::quote!(usize),
        quote::quote!(String),
        quote::quote!(&'static str),
        quote::quote!(Vec<f32>),
        quote::quote!(Option<String>),
        quote::quote!([usize; 3]),
        quote::quote!(HashMap<String, usize>),
        quote::quote!(Arc<str>),
        quote::quote!(Mutex<u64>),
        quote::quote!((usize, f32)),
        quote::quote!(()),
        quote::quote!(PhantomData<B>),
        quote::quote!(Device),
        quote::quote!(fn(f32) -> f32),
        quote::quote!(Box<dyn Fn(&Tensor) -> Tensor + Send + Sync>),
        quote::quote!(std::ops::Range<usize>),
    ] {
        let parsed: syn::Type = syn::parse2(ty.clone()).expect("a type");
        assert_eq!(classify_type(&parsed).describe(), "plain data", "{ty}");
    }
}

#[test]
fn hidden_tensors_are_rejected_with_a_hint() {
    let cases: [(syn::Type, &str, &str); 9] = [
        (syn::parse_quote!(HashMap<String, Tensor>), "has no stable order", "BTreeMap<String, Tensor>"),
        (
            syn::parse_quote!(Rc<RefCell<Tensor>>),
            "`Rc<RefCell<Tensor>>` is shared ownership",
            "cheap shared handles",
        ),
        (syn::parse_quote!(Arc<Encoder>), "shared ownership", "#[module(skip)]"),
        (syn::parse_quote!(Mutex<Tensor>), "interior mutability", "store the tensor"),
        (syn::parse_quote!(*const Tensor), "raw pointer", "store the value"),
        (syn::parse_quote!(&'a Param), "borrowed", "store the value"),
        (syn::parse_quote!((Tensor, Tensor)), "tuple", "own field"),
        (syn::parse_quote!(VecDeque<Block>), "not a container the derive walks", "Vec<T>"),
        (syn::parse_quote!(BTreeMap<(u8, u8), Tensor>), "cannot name paths", "`String`"),
    ];
    for (ty, reason, hint) in cases {
        let class = classify_type(&ty);
        let rejection = class.rejection().unwrap_or_else(|| panic!("{} accepted", type_to_string(&ty)));
        assert!(rejection.reason.contains(reason), "{}: {}", type_to_string(&ty), rejection.reason);
        assert!(rejection.hint.contains(hint), "{}: {}", type_to_string(&ty), rejection.hint);
    }
    // A rejected element inside a walked container is the element's rejection.
    let class = classify_type(&syn::parse_quote!(Vec<HashMap<String, Tensor>>));
    assert!(class.rejection().is_some_and(|r| r.reason.starts_with("`HashMap<String, Tensor>`")));
}

#[test]
fn skip_and_non_persistent() {
    let skipped = field(quote::quote!(#[module(skip)] cache: Rc<RefCell<Tensor>>));
    assert!(skipped.errors.is_empty(), "{:?}", messages(&skipped));
    assert_eq!(skipped.class.describe(), "skipped `Rc<RefCell<Tensor>>` (not moved, not saved)");
    assert!(!skipped.class.is_moved());

    let mask = field(quote::quote!(#[module(non_persistent)] masks: Vec<Tensor>));
    assert!(mask.errors.is_empty());
    assert_eq!(mask.class.describe(), "vec of non-persistent buffers");

    let skipped_param = field(quote::quote!(#[module(skip)] weight: Option<Param>));
    assert_eq!(
        messages(&skipped_param),
        ["a `Param` field cannot be skipped: the optimizer and `to()` would never see it"]
    );

    let np_param = field(quote::quote!(#[module(non_persistent)] weight: Param));
    assert_eq!(
        messages(&np_param),
        ["`non_persistent` applies to `Tensor` fields (or containers of them), not to a parameter"]
    );
    assert!(np_param.errors[0].help.contains("a `Param` is always saved"));
}

#[test]
fn attribute_errors_are_all_collected() {
    let f = field(quote::quote!(
        #[module(skip, skip, frobnicate)]
        #[module(non_persistent = true, crate = devcheck)]
        #[module]
        x: HashMap<String, Tensor>
    ));
    assert_eq!(
        messages(&f),
        [
            "duplicate module attribute `skip`",
            "unknown module attribute `frobnicate`",
            "`non_persistent` takes no value",
            "`crate` goes on the struct or enum, not on a field",
            "expected `#[module(...)]`",
            "`skip` and `non_persistent` contradict each other",
        ]
    );
    // Skipped: the HashMap is accepted, so no rejection is reported on top.
    assert!(matches!(f.class, FieldClass::Skipped { .. }));
}

#[test]
fn a_whole_enum_and_crate_path() {
    let input: syn::DeriveInput = syn::parse_quote! {
        #[module(crate = crate::reexport::devcheck)]
        enum Head {
            Linear(Linear),
            Mlp { up: Linear, down: Linear, #[module(skip)] act: Activation },
            Pair(Tensor, Tensor),
            Identity,
        }
    };
    let layout = classify_derive_input(&input);
    assert!(layout.errors.is_empty());
    assert_eq!(
        layout.attrs.krate.as_ref().map(|p| quote::quote!(#p).to_string()),
        Some("crate :: reexport :: devcheck".into())
    );
    let rows: Vec<(Option<String>, String, String)> =
        layout.fields().map(|f| (f.segment.clone(), f.name.clone(), f.class.describe())).collect();
    assert_eq!(
        rows,
        [
            (None, "Linear".into(), "submodule".into()),
            (Some("up".into()), "up".into(), "submodule".into()),
            (Some("down".into()), "down".into(), "submodule".into()),
            (Some("act".into()), "act".into(), "skipped `Activation` (not moved, not saved)".into()),
            (Some("0".into()), "0".into(), "buffer".into()),
            (Some("1".into()), "1".into(), "buffer".into()),
        ]
    );
}

#[test]
fn container_attribute_errors() {
    let input: syn::DeriveInput = syn::parse_quote! {
        #[module(skip, crate = a, crate = b, nope)]
        struct S {
            #[module(skip)]
            x: Tensor,
        }
    };
    let layout = classify_derive_input(&input);
    let messages: Vec<&str> = layout.errors.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "`skip` goes on a field, not on the struct or enum",
            "duplicate module attribute `crate`",
            "unknown module attribute `nope`",
        ]
    );
    let union: syn::DeriveInput = syn::parse_quote!(union U { a: u32 });
    assert_eq!(
        classify_derive_input(&union).errors[0].message,
        "`#[derive(Module)]` does not support unions"
    );
}

#[test]
fn types_print_as_written() {
    for (ty, text) in [
        (quote::quote!(Rc<RefCell<Tensor>>), "Rc<RefCell<Tensor>>"),
        (quote::quote!(HashMap<String, Tensor>), "HashMap<String, Tensor>"),
        (quote::quote!([Tensor; 4]), "[Tensor; 4]"),
        (quote::quote!(&'static str), "&'static str"),
        (quote::quote!(&'a mut Tensor), "&'a mut Tensor"),
        (quote::quote!(*const Tensor), "*const Tensor"),
        (quote::quote!(std::sync::Mutex<Vec<Tensor>>), "std::sync::Mutex<Vec<Tensor>>"),
        (quote::quote!(Box<dyn Fn(&Tensor) -> Tensor>), "Box<dyn Fn(&Tensor) -> Tensor>"),
        (quote::quote!((Tensor, f32)), "(Tensor, f32)"),
    ] {
        let parsed: syn::Type = syn::parse2(ty).expect("a type");
        assert_eq!(type_to_string(&parsed), text);
    }
}
